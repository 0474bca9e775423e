/**
 * The outbox relay's pass, measured: `npx tsx bench/relay.ts`.
 *
 * One Postgres (DATABASE_URL's server, or an embedded one) with a migrated database of its own, one Temporal
 * (TEMPORAL_ADDRESS, or an in-memory dev server), and BENCH_RELAY_N instances (default 3,000) inserted in SQL
 * as if they had run: 60% Running/Suspended on a bookmark, 20% Finished, 10% Running/Faulted with an
 * incident, 10% Finished/Cancelled; BENCH_RELAY_RECORDS activity records each (default 6), and one instance in
 * BENCH_RELAY_LONG_EVERY (default 100) with BENCH_RELAY_LONG_RECORDS (default 2,000): a long-lived one. Then:
 *
 * 1. `standing64`: the relay's read of where 64 instances stand (one pass's worth; the statement `claim` runs
 *    after its claim), BENCH_RELAY_READS times (default 300) over random instances: median and p95; and
 *    `standing1`, the same read for one instance (what a workflow reading it through an activity would run at
 *    each word, one instance a statement);
 * 2. `starts`: an outbox row for every instance, as their inserts leave them (`created`), drained pass after
 *    pass by one relay (each a `workflow.start`, a cancel request for a cancelled one): rows a second, the
 *    passes' median and p95;
 * 3. `signals`: a row for every instance again (a change), drained (each a signal-with-start to the open run).
 *
 * No worker polls the bench's task queue: what is measured is the relay (its statements and its requests to
 * Temporal), not the workflows. Results: a JSON line on stdout (BENCH_RELAY_LABEL names the run).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { ensureDatabase, startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { createLogger } from '../src/logger.js';
import { startDevServer } from '../src/temporal/devserver.js';
import { OutboxRelay } from '../src/temporal/outbox-relay.js';
import { freePort } from '../test/support/free-port.js';
import { dbUrl, round, stat } from './util.js';

const intEnv = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const N = intEnv('BENCH_RELAY_N', 3000);
const RECORDS = intEnv('BENCH_RELAY_RECORDS', 6);
const LONG_EVERY = intEnv('BENCH_RELAY_LONG_EVERY', 100);
const LONG_RECORDS = intEnv('BENCH_RELAY_LONG_RECORDS', 2000);
const READS = intEnv('BENCH_RELAY_READS', 300);

async function main() {
  const config = loadConfig();
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-bench-relay-'));
  const stops: (() => Promise<unknown>)[] = [() => rm(work, { recursive: true, force: true })];
  try {
    let adminUrl: string;
    if (config.databaseUrl) {
      adminUrl = dbUrl(config.databaseUrl, 'postgres');
    } else {
      const postgres = await startEmbeddedPostgres({
        dataDir: path.join(work, 'postgres'),
        port: await freePort(),
        database: 'postgres',
        persistent: false,
      });
      stops.unshift(() => postgres.stop());
      adminUrl = postgres.adminUrl;
    }
    let address = config.temporal.address;
    if (!address) {
      const temporal = await startDevServer({
        cliPath: config.temporal.cliPath,
        cacheDir: config.cacheDir,
        namespace: 'default',
        port: await freePort(),
        uiPort: 0,
      });
      stops.unshift(() => temporal.teardown());
      address = temporal.address;
    }
    const database = `wfa_bench_relay_${process.pid}`;
    await ensureDatabase(adminUrl, database);
    const pool = new pg.Pool({ connectionString: dbUrl(adminUrl, database), max: 4 });
    stops.unshift(async () => {
      await pool.end();
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`);
      await admin.end();
    });
    await migrate(pool);
    const ids = await seed(pool);

    const { Connection } = await import('@temporalio/client');
    const connection = await Connection.connect({ address });
    stops.unshift(() => connection.close());
    const client = new Client({ connection, namespace: 'default' });
    const relay = new OutboxRelay({
      pool,
      client,
      taskQueue: `bench-relay-${randomBytes(4).toString('hex')}`,
      logger: createLogger('warn'),
      searchAttributes: false,
    });

    // 1. The read of where one pass's instances stand.
    const standing = (relay as unknown as { standing(ids: string[]): Promise<Map<string, unknown>> }).standing.bind(
      relay,
    );
    const read = async (size: number) => {
      const times: number[] = [];
      for (let i = 0; i < READS; i++) {
        const some = Array.from({ length: size }, () => ids[Math.floor(Math.random() * ids.length)]!);
        const t = performance.now();
        const got = await standing(some);
        times.push(performance.now() - t);
        if (got.size === 0) throw new Error('the relay read nothing');
      }
      return stat(times);
    };
    const standing64 = await read(64);
    const standing1 = await read(1);
    // 2. and 3.: every instance's row drained, as new instances, then as changed ones.
    const drain = async (created: boolean) => {
      await pool.query(
        `INSERT INTO instance_outbox (instance_id, tenant_id, created)
         SELECT id, tenant_id, $1 FROM workflow_instances ORDER BY created_at, id`,
        [created],
      );
      const passes: number[] = [];
      const t0 = performance.now();
      let told = 0;
      for (;;) {
        const t = performance.now();
        const n = await relay.pass();
        if (n === 0) break;
        passes.push(performance.now() - t);
        told += n;
      }
      const seconds = (performance.now() - t0) / 1000;
      const left = Number((await pool.query('SELECT count(*) FROM instance_outbox')).rows[0].count);
      if (left > 0 || told < N) throw new Error(`the relay told ${told} of ${N} rows (${left} left)`);
      return { rows: told, seconds: round(seconds, 2), rowsPerSecond: round(told / seconds), pass: stat(passes) };
    };
    const starts = await drain(true);
    const signals = await drain(false);
    const result = {
      label: process.env.BENCH_RELAY_LABEL ?? '',
      n: N,
      records: RECORDS,
      longEvery: LONG_EVERY,
      longRecords: LONG_RECORDS,
      standing64,
      standing1,
      starts,
      signals,
    };
    console.log(JSON.stringify(result));
  } finally {
    for (const stop of stops) await stop().catch((err: unknown) => console.error(err));
  }
}

/** The instances, their activity records and incidents, in SQL with the outbox off; their ids. */
async function seed(pool: pg.Pool): Promise<string[]> {
  await pool.query(
    `INSERT INTO workflow_definitions (id, tenant_id, definition_id, version, is_latest, variables, root, options)
     VALUES ('bench-relay:1', '', 'bench-relay', 1, true, '[]', '{}', '{}')`,
  );
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SET LOCAL wfa.outbox = 'off'");
    await client.query(
      `INSERT INTO workflow_instances
         (id, tenant_id, definition_id, definition_version_id, version, status, sub_status, variables, scheduled,
          bookmarks, incidents, created_at, updated_at, finished_at)
       SELECT gen_random_uuid()::text, '', 'bench-relay', 'bench-relay:1', 1,
              CASE WHEN n % 10 IN (6, 7, 9) THEN 'Finished' ELSE 'Running' END,
              CASE n % 10 WHEN 6 THEN 'Finished' WHEN 7 THEN 'Finished' WHEN 8 THEN 'Faulted' WHEN 9 THEN 'Cancelled'
                          ELSE 'Suspended' END,
              '{"amount": 42}', '[]',
              CASE WHEN n % 10 < 6 THEN '[{"activityId":"wait","eventName":"approve"}]'::jsonb ELSE '[]' END,
              CASE WHEN n % 10 = 8 THEN '[{"activityId":"charge","activityType":"Elsa.Fault","message":"card declined","timestamp":"2026-11-25T00:00:00Z"}]'::jsonb
                   ELSE '[]' END,
              now() + n * interval '1 microsecond', now(),
              CASE WHEN n % 10 IN (6, 7, 9) THEN now() END
         FROM generate_series(1, $1::int) AS n`,
      [N],
    );
    await client.query(
      `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, status, started_at, completed_at)
       SELECT i.id, '', 'step-' || r, 'flow1:step-' || r, 'Elsa.WriteLine', 'Completed', now(), now()
         FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM workflow_instances) i
         CROSS JOIN LATERAL generate_series(1, CASE WHEN i.n % $2 = 0 THEN $3::int ELSE $1::int END) AS r`,
      [RECORDS, LONG_EVERY, LONG_RECORDS],
    );
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  await pool.query('ANALYZE workflow_instances; ANALYZE activity_records');
  const { rows } = await pool.query<{ id: string }>('SELECT id FROM workflow_instances');
  return rows.map((r) => r.id);
}

await main();
