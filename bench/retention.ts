/**
 * What purging a quarter's jobs costs the requests that run meanwhile: `npm run bench:retention`.
 *
 * Postgres only (embedded, or DATABASE_URL's server): RETENTION_PLANS finished plans (10) of RETENTION_JOBS jobs in
 * all (10,000,000), generated 100 to 100 + RETENTION_PLANS days ago and finished 91 days ago, in their weeks'
 * partitions; and a plan of RETENTION_LIVE_JOBS jobs (100,000) generated now, inside its days. Then the retention sweep
 * runs as a worker runs it, while
 *   - two connections do what requests do to these tables, one after the other, each timed: a page of the live
 *     plan's jobs, a batch of 100 of its jobs written, its plan row read and updated;
 *   - a third samples `pg_locks` every 5 ms: each lock on the jobs, plans, sets or counts tables in a mode that
 *     would make a request wait (SHARE and stronger), and how long it was seen held; and SHARE UPDATE EXCLUSIVE
 *     (which DETACH ... CONCURRENTLY takes and no request waits for), for the record.
 * Then the dead tuples each table (and its TOAST table) is left with, and what is left of the live plan.
 * Results in bench/results/retention-latest.json.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { sweepRetention } from '../src/alterations/retention.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { benchPostgres } from './servers.js';
import { dbUrl, recreateDatabase, round } from './util.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS_FILE = process.env.RETENTION_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'retention-latest.json');
const JOBS = Number(process.env.RETENTION_JOBS ?? 10_000_000);
const PLANS = Number(process.env.RETENTION_PLANS ?? 10);
const LIVE = Number(process.env.RETENTION_LIVE_JOBS ?? 100_000);
const SAMPLE_MS = 5;
const TABLES = ['alteration_jobs', 'alteration_plans', 'alteration_job_sets', 'alteration_batch_counts'];
const log = (msg: string) => process.stdout.write(`[retention] ${msg}\n`);

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return round(s[Math.min(s.length - 1, Math.floor(s.length * p))] ?? 0, 2);
};

/** One plan's jobs and sets, generated at `at` (SQL), `n` of them, every tenth Failed, each with a before-image. */
async function seedPlan(db: pg.Pool, id: string, n: number, at: string, finished: string | null) {
  await db.query(
    `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at, started_at, completed_at)
     VALUES ($1, '', '[{"type":"ModifyVariable","variableId":"amount","value":1}]', '{}', 'h', $3, $2, ${at}, ${at}, ${finished ?? 'NULL'})`,
    [id, n, finished ? 4 : 3],
  );
  for (let from = 0; from < n; from += 1_000_000) {
    const to = Math.min(n, from + 1_000_000) - 1;
    await db.query(
      `INSERT INTO alteration_job_sets (plan_id, first_ord, instance_ids, created_at)
       SELECT $1, k * 1000, ARRAY(SELECT 'instance-' || lpad(o::text, 9, '0') FROM generate_series(k * 1000, least(k * 1000 + 999, $3)) AS o), ${at}
         FROM generate_series($2::int / 1000, $3::int / 1000) AS k`,
      [id, from, to],
    );
    await db.query(
      `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at, started_at, completed_at, undo, revision)
       SELECT $1, o, wfa_job_id($1, ${at}, o), 'instance-' || lpad(o::text, 9, '0'), CASE WHEN o % 10 = 0 THEN 3 ELSE 2 END,
              ${at}, ${at}, ${at}, '[["/variables/amount", 0]]', 3
         FROM generate_series($2::int, $3::int) AS o`,
      [id, from, to],
    );
  }
  await db.query(
    `INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed)
     SELECT $1, k * 1000, 900, 100 FROM generate_series(0, ($2::int - 1) / 1000) AS k`,
    [id, n],
  );
}

interface Held {
  relation: string;
  mode: string;
  ms: number;
}

async function main() {
  const stops: (() => Promise<unknown>)[] = [];
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-retention-bench-'));
  stops.push(() => rm(work, { recursive: true, force: true }));
  const config = loadConfig();
  try {
    const adminUrl = await benchPostgres(config, work, stops);
    const database = `wfa_retention_bench_${process.pid}`;
    await recreateDatabase(adminUrl, database);
    const url = dbUrl(adminUrl, database);
    const db = createPool(url, { max: 8, statementTimeoutMs: 0 });
    stops.unshift(() => db.end());
    await migrate(db);

    // The old plans: generated 100, 101, … days ago, finished 91 days ago.
    let t = performance.now();
    const per = Math.floor(JOBS / PLANS);
    for (let k = 0; k < PLANS; k++) {
      const at = `(now() - interval '${100 + k} days')`;
      await db.query(`SELECT wfa_job_partition(${at})`);
      await seedPlan(db, `old-${k}`, per, at, "now() - interval '91 days'");
      log(`seeded old-${k}: ${per.toLocaleString('en-US')} jobs`);
    }
    await seedPlan(db, 'live', LIVE, 'now()', null);
    await db.query('VACUUM ANALYZE');
    const seedSeconds = round((performance.now() - t) / 1000);
    const { rows: before } = await db.query<{ name: string; rows: string; bytes: string }>(
      `SELECT p.name, (SELECT count(*) FROM alteration_jobs j WHERE j.tableoid = p.name::regclass) AS rows,
              pg_total_relation_size(p.name::regclass) AS bytes
         FROM wfa_job_partitions() p ORDER BY p.hi`,
    );
    log(
      `seeded in ${seedSeconds} s: ${before.map((p) => `${p.name} ${Number(p.rows).toLocaleString('en-US')}`).join(', ')}`,
    );

    // What requests do meanwhile, timed.
    let running = true;
    const latencies: Record<string, number[]> = { readPage: [], writeBatch: [], planRow: [] };
    let nextOrd = LIVE;
    const requests = async () => {
      const client = await db.connect();
      try {
        while (running) {
          let s = performance.now();
          await client.query(
            `SELECT id, status FROM alteration_jobs WHERE plan_id = 'live' AND ord > $1 ORDER BY ord LIMIT 50`,
            [Math.floor(Math.random() * (LIVE - 50))],
          );
          latencies.readPage!.push(performance.now() - s);
          s = performance.now();
          const from = nextOrd;
          nextOrd += 100;
          await client.query(
            `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at, completed_at)
             SELECT 'live', o, 'extra-' || o, 'instance-x' || o, 2, (SELECT created_at FROM alteration_job_sets WHERE plan_id = 'live' LIMIT 1), now()
               FROM generate_series($1::int, $1::int + 99) AS o`,
            [from],
          );
          latencies.writeBatch!.push(performance.now() - s);
          s = performance.now();
          await client.query("UPDATE alteration_plans SET steering = steering + 1 WHERE id = 'live'");
          latencies.planRow!.push(performance.now() - s);
        }
      } finally {
        client.release();
      }
    };
    // The sampler: how long each strong lock on a table requests use is seen held.
    const seen = new Map<string, { relation: string; mode: string; first: number; last: number }>();
    const done: Held[] = [];
    const sampler = async () => {
      const client = await db.connect();
      try {
        while (running) {
          const now = performance.now();
          const { rows } = await client.query<{ pid: number; relation: string; mode: string }>(
            `SELECT l.pid, c.relname AS relation, l.mode
               FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
              WHERE l.locktype = 'relation' AND l.granted AND c.relname = ANY($1)
                AND l.mode IN ('ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')`,
            [TABLES],
          );
          const current = new Set<string>();
          for (const r of rows) {
            const key = `${r.pid}/${r.relation}/${r.mode}`;
            current.add(key);
            const s = seen.get(key);
            if (s) s.last = now;
            else seen.set(key, { relation: r.relation, mode: r.mode, first: now, last: now });
          }
          for (const [key, s] of seen)
            if (!current.has(key)) {
              done.push({ relation: s.relation, mode: s.mode, ms: s.last - s.first + SAMPLE_MS });
              seen.delete(key);
            }
          await new Promise((r) => setTimeout(r, SAMPLE_MS));
        }
        for (const s of seen.values())
          done.push({ relation: s.relation, mode: s.mode, ms: s.last - s.first + SAMPLE_MS });
      } finally {
        client.release();
      }
    };

    // Requests alone first (the baseline), then with the sweep.
    const baseline = async (ms: number) => {
      const work = [requests(), requests()];
      await new Promise((r) => setTimeout(r, ms));
      running = false;
      await Promise.all(work);
      const out = Object.fromEntries(
        Object.entries(latencies).map(([k, xs]) => [
          k,
          { n: xs.length, p50: percentile(xs, 0.5), p99: percentile(xs, 0.99), max: percentile(xs, 1) },
        ]),
      );
      for (const xs of Object.values(latencies)) xs.length = 0;
      running = true;
      return out;
    };
    const alone = await baseline(5000);
    const work2 = [requests(), requests(), sampler()];
    t = performance.now();
    const purged = await sweepRetention(db, {
      planDays: 90,
      instanceDays: undefined,
      auditDays: 400,
      sweepSeconds: 600,
    });
    const sweepSeconds = round((performance.now() - t) / 1000, 2);
    running = false;
    await Promise.all(work2);
    const during = Object.fromEntries(
      Object.entries(latencies).map(([k, xs]) => [
        k,
        { n: xs.length, p50: percentile(xs, 0.5), p99: percentile(xs, 0.99), max: percentile(xs, 1) },
      ]),
    );
    log(`swept in ${sweepSeconds} s: ${JSON.stringify(purged)}`);

    // Dead tuples, once the sweep's statistics are in (a backend reports them within 10 s of going idle).
    await new Promise((r) => setTimeout(r, 12_000));
    const { rows: dead } = await db.query<{ relation: string; live: string; dead: string }>(
      `SELECT c.relname AS relation, s.n_live_tup AS live, s.n_dead_tup AS dead
         FROM pg_class c JOIN pg_stat_all_tables s ON s.relid = c.oid
        WHERE c.relname LIKE 'alteration_jobs%' OR c.relname = ANY($1)
           OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname = ANY($1) OR relname LIKE 'alteration_jobs%')
        ORDER BY c.relname`,
      [TABLES],
    );
    const { rows: left } = await db.query<{ name: string; rows: string }>(
      `SELECT p.name, (SELECT count(*) FROM alteration_jobs j WHERE j.tableoid = p.name::regclass) AS rows
         FROM wfa_job_partitions() p ORDER BY p.hi`,
    );
    // The live plan's own jobs (the requests' batches wrote more after them).
    const liveJobs = Number(
      (await db.query("SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = 'live' AND ord < $1", [LIVE])).rows[0]
        .n,
    );

    const longest = (modes: string[]) => {
      const held = done.filter((h) => modes.includes(h.mode));
      return held.length ? held.reduce((a, b) => (b.ms > a.ms ? b : a)) : null;
    };
    const results = {
      at: new Date().toISOString(),
      jobs: JOBS,
      plans: PLANS,
      liveJobs: LIVE,
      seedSeconds,
      partitionsBefore: before.map((p) => ({
        name: p.name,
        rows: Number(p.rows),
        mb: round(Number(p.bytes) / 1048576),
      })),
      sweepSeconds,
      purged,
      requestsAlone: alone,
      requestsDuringSweep: during,
      longestBlockingLock: longest(['ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock']),
      longestShareUpdateExclusive: longest(['ShareUpdateExclusiveLock']),
      lockSamplesEveryMs: SAMPLE_MS,
      deadTuples: dead.map((d) => ({ relation: d.relation, live: Number(d.live), dead: Number(d.dead) })),
      partitionsAfter: left.map((p) => ({ name: p.name, rows: Number(p.rows) })),
      liveJobsAfter: liveJobs,
    };
    process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    for (const stop of stops) await stop().catch((err) => log(`stop failed: ${String(err)}`));
  }
}

await main();
