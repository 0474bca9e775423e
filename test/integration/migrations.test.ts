import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ensureBootstrapApiKey, findApiKeyPrincipal } from '../../src/auth/api-keys.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { listJobs } from '../../src/alterations/plans.js';
import { ensureDatabase } from '../../src/embedded/postgres.js';

const pools: pg.Pool[] = [];
const databases: string[] = [];

async function freshDatabase(): Promise<string> {
  const name = `wfa_empty_${randomBytes(5).toString('hex')}`;
  await ensureDatabase(inject('pgAdminUrl'), name);
  databases.push(name);
  const url = new URL(inject('pgAdminUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

/** A pool (closed after the tests) on a fresh database migrated up to `upTo` (every migration without it). */
async function migratedDatabase(upTo?: number, options: Parameters<typeof createPool>[1] = 2) {
  const url = await freshDatabase();
  const pool = createPool(url, options);
  pools.push(pool);
  await migrate(pool, undefined, upTo === undefined ? {} : { upTo });
  return { url, pool };
}

const count = async (pool: pg.Pool, sql: string) => Number((await pool.query(sql)).rows[0].n);

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await admin.connect();
  for (const d of databases) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(d)} WITH (FORCE)`);
  await admin.end();
});

describe('migrations', () => {
  it('two processes migrating an empty database at once apply each migration exactly once', async () => {
    const url = await freshDatabase();
    const a = createPool(url, 2);
    const b = createPool(url, 2);
    pools.push(a, b);
    const [appliedA, appliedB] = await Promise.all([migrate(a), migrate(b)]);
    const all = [...appliedA, ...appliedB].sort((x, y) => x - y);
    const { rows } = await a.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(all).toEqual(rows.map((r) => r.version));
    expect(rows.length).toBeGreaterThan(0);
    // A third start finds nothing to do.
    expect(await migrate(a)).toEqual([]);
  });

  it('the bootstrap admin key is generated once, even by two processes starting together', async () => {
    const url = await freshDatabase();
    const pool = createPool(url, 4);
    pools.push(pool);
    await migrate(pool);
    const keys = (await Promise.all([ensureBootstrapApiKey(pool), ensureBootstrapApiKey(pool)])).filter(
      Boolean,
    ) as string[];
    expect(keys).toHaveLength(1);
    expect(await ensureBootstrapApiKey(pool)).toBeUndefined();
    const principal = await findApiKeyPrincipal(pool, keys[0]!);
    expect(principal).toMatchObject({ permissions: ['*'], tenantId: null });
    const { rows } = await pool.query('SELECT key_hash FROM api_keys WHERE is_bootstrap');
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash).not.toContain(keys[0]);
  });

  it('008 keeps a plan left mid-way by the release before: its jobs, ids and order read the same', async () => {
    const { pool } = await migratedDatabase(7);
    // As release 7 left it: 2,500 jobs with a row each, the first 1,200 Completed, the rest Pending.
    await pool.query(`
      INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at, started_at)
      VALUES ('old-plan', 'default', '[]', '{}', 'h', 7, 2500, now(), now());
      INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at, started_at, completed_at)
      SELECT 'old-plan', n, gen_random_uuid()::text, 'instance-' || n, CASE WHEN n < 1200 THEN 2 ELSE 0 END,
             now(), CASE WHEN n < 1200 THEN now() END, CASE WHEN n < 1200 THEN now() END
        FROM generate_series(0, 2499) AS n;
      INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed) VALUES ('old-plan', 0, 1200, 0);
      INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at, revert_of)
      VALUES ('old-revert', 'default', '[]', '{}', 'h', 7, 2, now(), 'old-plan');
      INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, created_at)
      VALUES ('old-revert', 0, gen_random_uuid()::text, 'instance-5', now()), ('old-revert', 1, gen_random_uuid()::text, 'instance-3', now());`);
    const { rows: before } = await pool.query<{ id: string; status: number; instance_id: string }>(
      "SELECT id, status, instance_id FROM alteration_jobs WHERE plan_id = 'old-plan' ORDER BY ord",
    );
    expect(await migrate(pool, undefined, { upTo: 8 })).toEqual([8]);
    const { rows: sets } = await pool.query<{ first_ord: number; size: number }>(
      "SELECT first_ord, cardinality(instance_ids) AS size FROM alteration_job_sets WHERE plan_id = 'old-plan' ORDER BY first_ord",
    );
    expect(sets).toEqual([
      { first_ord: 0, size: 1000 },
      { first_ord: 1000, size: 1000 },
      { first_ord: 2000, size: 500 },
    ]);
    // A revert plan's set knows the ord of each job it undoes.
    const { rows: revert } = await pool.query(
      "SELECT instance_ids, source_ords FROM alteration_job_sets WHERE plan_id = 'old-revert'",
    );
    expect(revert).toEqual([{ instance_ids: ['instance-5', 'instance-3'], source_ords: [5, 3] }]);
    // Read by today's code, so with every later migration too (it reads their columns).
    await migrate(pool);
    const read = [];
    let after: string | undefined;
    do {
      const page = await listJobs(pool, 'default', 'old-plan', { after, limit: 700 });
      read.push(...page.items);
      after = page.nextCursor ?? undefined;
    } while (after);
    expect(read.map((j) => [j.id, j.status, j.workflowInstanceId])).toEqual(
      before.map((r) => [r.id, r.status, r.instance_id]),
    );
  });

  it('009: a deleted plan takes its jobs with it (a statement trigger instead of the per-row foreign key)', async () => {
    const { pool } = await migratedDatabase();
    await pool.query(`
      INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at)
      VALUES ('gone', 'default', '[]', '{}', 'h', 4, 3, now()), ('kept', 'default', '[]', '{}', 'h', 4, 2, now());
      INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at)
      SELECT p, n, p || n, 'instance-' || n, 2, now()
        FROM (VALUES ('gone', 3), ('kept', 2)) AS t(p, k), generate_series(0, k - 1) AS n;`);
    const { rows: fk } = await pool.query(
      "SELECT conname FROM pg_constraint WHERE conrelid = 'alteration_jobs'::regclass AND contype = 'f'",
    );
    expect(fk).toEqual([]);
    await pool.query("DELETE FROM alteration_plans WHERE id = 'gone'");
    const { rows } = await pool.query('SELECT plan_id, count(*)::int AS n FROM alteration_jobs GROUP BY plan_id');
    expect(rows).toEqual([{ plan_id: 'kept', n: 2 }]);
  });

  it("022/023 hold an instance's definition to its version's: checked over rows written before, a mismatch named", async () => {
    const { pool } = await migratedDatabase(21);
    await pool.query(`
      INSERT INTO workflow_definitions (id, tenant_id, definition_id, version, is_latest, variables, root, options)
      VALUES ('one:1', '', 'one', 1, true, '[]', '{}', '{}'), ('two:1', '', 'two', 1, true, '[]', '{}', '{}');
      INSERT INTO workflow_instances (id, tenant_id, definition_id, definition_version_id, version, status, sub_status,
                                      variables, scheduled, bookmarks, created_at, updated_at)
      VALUES ('fine', '', 'one', 'one:1', 1, 'Running', 'Suspended', '{}', '[]', '[]', now(), now()),
             ('changed-by-hand', '', 'two', 'one:1', 1, 'Running', 'Suspended', '{}', '[]', '[]', now(), now());`);
    // 022 applies (it reads no row); 023's check fails on the mismatched row, naming its key, and nothing of it stays.
    await expect(migrate(pool)).rejects.toThrow(
      /Migration 023_\S+ failed; nothing of it was applied \(Key \(definition_id, definition_version_id\)=\(two, one:1\) is not present/,
    );
    const versions = async () =>
      (await pool.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map(
        (r) => r.version,
      );
    expect((await versions()).slice(-2)).toEqual([21, 22]);
    // Rows written after 022 are held to it already.
    await expect(
      pool.query(`INSERT INTO workflow_instances (id, tenant_id, definition_id, definition_version_id, version, status,
                    sub_status, variables, scheduled, bookmarks, created_at, updated_at)
                  VALUES ('new', '', 'two', 'one:1', 1, 'Running', 'Suspended', '{}', '[]', '[]', now(), now())`),
    ).rejects.toMatchObject({ code: '23503' });
    // Put right as docs/operations.md says, the next start applies 023.
    await pool.query(`UPDATE workflow_instances i SET definition_id = d.definition_id FROM workflow_definitions d
                       WHERE d.id = i.definition_version_id AND i.definition_id <> d.definition_id`);
    expect(await migrate(pool)).toContain(23);
    const { rows } = await pool.query<{ convalidated: boolean }>(
      "SELECT convalidated FROM pg_constraint WHERE conname = 'workflow_instances_version_of_definition'",
    );
    expect(rows).toEqual([{ convalidated: true }]);
  });

  it("024: a revert rejected, withdrawn or expired while held no longer counts as its plan's one revert", async () => {
    const { pool } = await migratedDatabase(23);
    const plan = (id: string, status: number, revertOf: string | null, state: string | null = null) =>
      pool.query(
        `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at, revert_of, approval)
         VALUES ($1, 'default', '[]', '{}', 'h', $2, now(), $3, $4::jsonb)`,
        [id, status, revertOf, state === null ? null : JSON.stringify({ state })],
      );
    await plan('p', 4, null);
    await plan('r-rejected', 6, 'p', 'Rejected');
    // Before 024 the rejected revert holds the plan's one place.
    await expect(plan('r-before', 8, 'p', 'Pending')).rejects.toMatchObject({ code: '23505' });
    expect(await migrate(pool, undefined, { upTo: 24 })).toEqual([24]);
    await plan('r-withdrawn', 6, 'p', 'Withdrawn');
    await plan('r-expired', 6, 'p', 'Expired');
    await plan('r-held', 8, 'p', 'Pending');
    // One that counts still holds it: held, approved and run, or cancelled after it ran.
    await expect(plan('r-second', 0, 'p')).rejects.toMatchObject({ code: '23505' });
    await pool.query(
      'UPDATE alteration_plans SET status = 6, approval = approval || \'{"state": "Approved"}\' WHERE id = \'r-held\'',
    );
    await expect(plan('r-third', 0, 'p')).rejects.toMatchObject({ code: '23505' });
  });

  it("a migration waits as long as it must, whatever the pool's statement timeout (023 behind a lock held 1.5 s)", async () => {
    const { url, pool } = await migratedDatabase(22, { max: 2, statementTimeoutMs: 500 });
    // Another transaction holds the lock VALIDATE takes, for three times the pool's statement timeout.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE workflow_instances IN SHARE UPDATE EXCLUSIVE MODE');
      const released = sleep(1_500).then(() => holder.query('COMMIT'));
      expect(await migrate(pool, undefined, { upTo: 24 })).toEqual([23, 24]);
      await released;
    } finally {
      await holder.end();
    }
  });

  it('025: a write that changes only variables, revision and updated_at is heap-only (no new index entries)', async () => {
    const { pool } = await migratedDatabase(24);
    await pool.query(`
      INSERT INTO workflow_definitions (id, tenant_id, definition_id, version, is_latest, variables, root, options)
      VALUES ('one:1', '', 'one', 1, true, '[]', '{}', '{}');
      INSERT INTO workflow_instances (id, tenant_id, definition_id, definition_version_id, version, status, sub_status,
                                      variables, scheduled, bookmarks, created_at, updated_at)
      VALUES ('hot', '', 'one', 'one:1', 1, 'Running', 'Suspended', '{}', '[]', '[]', now(), now());`);
    const hotUpdates = async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        // Counts of this backend not yet reported (earlier transactions' included): the difference is this write's.
        const counts = async () =>
          (
            await client.query<{ hot: string; all: string }>(
              `SELECT n_tup_hot_upd AS hot, n_tup_upd AS all FROM pg_stat_xact_user_tables WHERE relname = 'workflow_instances'`,
            )
          ).rows[0]!;
        const before = await counts();
        await client.query(
          `UPDATE workflow_instances SET variables = variables || '{"x": 1}', revision = revision + 1, updated_at = now()
            WHERE id = 'hot'`,
        );
        const after = await counts();
        await client.query('COMMIT');
        return { hot: Number(after.hot) - Number(before.hot), all: Number(after.all) - Number(before.all) };
      } finally {
        client.release();
      }
    };
    // Before 025 the B-tree on (tenant_id, updated_at) keeps the write from being heap-only.
    expect(await hotUpdates()).toEqual({ hot: 0, all: 1 });
    expect(await migrate(pool, undefined, { upTo: 25 })).toEqual([25]);
    expect(await hotUpdates()).toEqual({ hot: 1, all: 1 });
    // No index of the table covers updated_at any more (an index on it, of whatever kind, is where the write
    // could stop being heap-only), and the pages written from now on keep room for new versions.
    const { rows } = await pool.query<{ index: string }>(
      `SELECT c.relname AS index FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
        WHERE x.indrelid = 'workflow_instances'::regclass
          AND (SELECT attnum FROM pg_attribute WHERE attrelid = 'workflow_instances'::regclass AND attname = 'updated_at')
              = ANY (x.indkey::int2[])`,
    );
    expect(rows).toEqual([]);
    const { rows: options } = await pool.query<{ reloptions: string[] }>(
      "SELECT reloptions FROM pg_class WHERE oid = 'workflow_instances'::regclass",
    );
    expect(options[0]!.reloptions).toContain('fillfactor=85');
  });
  it('036 partitions the jobs a release before wrote, in place: they read the same, keyed the same, and new weeks follow', async () => {
    const { pool } = await migratedDatabase(35);
    // As release 35 left it: a plan finished long ago (2,500 jobs) and one mid-way (3,000 in its sets, 1,200 written).
    await pool.query(`
      INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at, started_at, completed_at)
      VALUES ('done', 'default', '[]', '{}', 'h', 4, 2500, now() - interval '120 days', now() - interval '120 days', now() - interval '119 days'),
             ('midway', 'default', '[]', '{}', 'h', 3, 3000, now() - interval '1 day', now() - interval '1 day', NULL);
      INSERT INTO alteration_job_sets (plan_id, first_ord, instance_ids, created_at)
      SELECT t.p, k * 1000, ARRAY(SELECT 'instance-' || n FROM generate_series(k * 1000, least(k * 1000 + 999, t.total - 1)) AS n), t.at
        FROM (VALUES ('done', 2500, now() - interval '120 days'), ('midway', 3000, now() - interval '1 day')) AS t(p, total, at),
             generate_series(0, (t.total - 1) / 1000) AS k;
      INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at, started_at, completed_at, undo, revision)
      SELECT s.plan_id, s.first_ord + m.k - 1, wfa_job_id(s.plan_id, s.created_at, s.first_ord + m.k - 1), m.id,
             CASE WHEN m.k % 10 = 0 THEN 3 ELSE 2 END, s.created_at, now(), now(), '[]', 1
        FROM alteration_job_sets s CROSS JOIN LATERAL unnest(s.instance_ids) WITH ORDINALITY AS m(id, k)
       WHERE s.plan_id = 'done' OR s.first_ord + m.k - 1 < 1200;
      INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed)
      VALUES ('done', 0, 2250, 250), ('midway', 0, 1080, 120);`);
    const readAll = async (planId: string) => {
      const read = [];
      let after: string | undefined;
      do {
        const page = await listJobs(pool, 'default', planId, { after, limit: 1000 });
        read.push(...page.items.map((j) => [j.id, j.status, j.workflowInstanceId, j.createdAt]));
        after = page.nextCursor ?? undefined;
      } while (after);
      return read;
    };
    const before = { done: await readAll('done'), midway: await readAll('midway') };
    expect(before.done).toHaveLength(2500);
    expect(before.midway).toHaveLength(3000);

    expect(await migrate(pool, undefined, { upTo: 36 })).toEqual([36]);
    const { rows: kind } = await pool.query("SELECT relkind FROM pg_class WHERE relname = 'alteration_jobs'");
    expect(kind).toEqual([{ relkind: 'p' }]);
    // The old rows were not copied: their table is the partition of everything before the next Monday.
    const { rows: parts } = await pool.query<{ name: string; lo: Date | null; hi: Date }>(
      'SELECT name, lo, hi FROM wfa_job_partitions() ORDER BY hi',
    );
    const monday = new Date(Date.now());
    monday.setUTCHours(0, 0, 0, 0);
    monday.setUTCDate(monday.getUTCDate() + ((8 - monday.getUTCDay()) % 7 || 7));
    expect(parts[0]).toEqual({ name: 'alteration_jobs_legacy', lo: null, hi: monday });
    // Then a partition a week, four weeks ahead.
    expect(parts.slice(1).map((p) => p.hi.getTime() - p.lo!.getTime())).toEqual(Array(4).fill(7 * 24 * 3600 * 1000));
    expect(await count(pool, 'SELECT count(*) AS n FROM alteration_jobs_legacy')).toBe(3700);
    await migrate(pool);
    expect({ done: await readAll('done'), midway: await readAll('midway') }).toEqual(before);

    // The mid-way plan's next jobs go where its others are; one written twice names the partition's key.
    const write = (from: number, to: number) =>
      pool.query(
        `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at)
         SELECT 'midway', o, wfa_job_id('midway', created_at, o), instance_ids[o - first_ord + 1], 2, created_at
           FROM alteration_job_sets, generate_series($1::int, $2::int) AS o
          WHERE plan_id = 'midway' AND o BETWEEN first_ord AND first_ord + 999`,
        [from, to],
      );
    await write(1200, 1999);
    const { rows: where } = await pool.query(
      "SELECT DISTINCT tableoid::regclass::text AS t FROM alteration_jobs WHERE plan_id = 'midway'",
    );
    expect(where).toEqual([{ t: 'alteration_jobs_legacy' }]);
    const twice = await write(1999, 1999).catch((err: unknown) => err);
    expect(twice).toMatchObject({ code: '23505', constraint: 'alteration_jobs_legacy_pkey' });
    // A job generated next week goes to that week's partition.
    await pool.query(
      `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at)
       VALUES ('midway', 5000, 'next-week', 'instance-x', 0, now() + interval '7 days')`,
    );
    const { rows: next } = await pool.query(
      "SELECT tableoid::regclass::text AS t FROM alteration_jobs WHERE id = 'next-week'",
    );
    const nextWeek = Date.now() + 7 * 24 * 3600 * 1000;
    expect(next[0].t).toBe(parts.find((p) => p.lo && p.lo.getTime() <= nextWeek && nextWeek < p.hi.getTime())!.name);
    expect(next[0].t).toMatch(/^alteration_jobs_\d{8}$/);
  });
});
