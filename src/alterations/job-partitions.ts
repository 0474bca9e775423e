import type pg from 'pg';
import type { Queryable } from '../db/pool.js';

/**
 * The jobs table's weekly partitions (migration 036): made ahead of need, and dropped whole once no plan with jobs
 * in them is left. A plan purged by retention leaves its job rows to their partition; the partition goes when the
 * last plan of its week has gone. A week held longer by a plan that is kept (a long-running plan, one a kept
 * revert names) loses its purged plans' rows by batched deletes once it is a week past its due.
 */

/** Weeks made ahead of now by each sweep. */
const WEEKS_AHEAD = 4;
/** A past week's partition is only looked at once this much time has passed after its end (clocks of nodes differ). */
const SETTLED_MS = 60 * 60 * 1000;
/** A held week past this long after its end loses its purged plans' rows by deletes. */
const HELD_GRACE_MS = 7 * 24 * 60 * 60 * 1000;
/** A dropped partition's rows are counted up to this many, estimated past it. */
const ESTIMATED_PAST = 100_000;
/** One sweep at a time across workers: DETACH ... CONCURRENTLY of one partition by two would fail. */
const SWEEP_LOCK = 7_304_119_513;

/** The partition that holds jobs made at `at`, made now when there is none. */
export async function ensureJobPartition(db: Queryable, at: Date): Promise<string> {
  const { rows } = await db.query<{ name: string }>('SELECT wfa_job_partition($1) AS name', [at]);
  return rows[0]!.name;
}

/**
 * Makes the weeks ahead, then drops each past week that no remaining plan has jobs in (DETACH ... CONCURRENTLY,
 * then DROP: no lock a request waits for), and deletes, `batch` rows a statement, the purged plans' rows from a week
 * held past its grace. Skipped when another worker is at it. Returns the job rows that went.
 */
export async function sweepJobPartitions(
  pool: pg.Pool,
  batch: number,
  stopped: () => boolean = () => false,
): Promise<number> {
  let jobs = 0;
  const client = await pool.connect();
  try {
    const { rows: locked } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [SWEEP_LOCK]);
    if (!locked[0]!.ok) return 0;
    try {
      for (let w = 0; w <= WEEKS_AHEAD; w++)
        await ensureJobPartition(client, new Date(Date.now() + w * 7 * 24 * 3600 * 1000));
      // A detach a stopped sweep left half done is finished first.
      for (const p of await partitions(client)) if (p.detaching) await dropPartition(client, p.name, true);
      for (const p of await partitions(client)) {
        if (stopped()) break;
        if (p.detaching || p.hi.getTime() > Date.now() - SETTLED_MS) continue;
        if (!(await weekHeld(client, p))) jobs += await dropPartition(client, p.name, false);
        else if (p.hi.getTime() < Date.now() - HELD_GRACE_MS)
          jobs += await deletePurgedRows(client, p.name, batch, stopped);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [SWEEP_LOCK]);
    }
  } finally {
    client.release();
  }
  return jobs;
}

interface Partition {
  name: string;
  lo: Date | null;
  hi: Date;
  detaching: boolean;
}

async function partitions(db: Queryable): Promise<Partition[]> {
  const { rows } = await db.query<Partition>('SELECT name, lo, hi, detaching FROM wfa_job_partitions() ORDER BY hi');
  return rows;
}

/** Whether a plan that still exists has jobs in the week: its sets (one row per 1,000 jobs) say so, by time. */
async function weekHeld(db: Queryable, p: Partition): Promise<boolean> {
  const { rows } = await db.query(
    'SELECT 1 FROM alteration_job_sets WHERE ($1::timestamptz IS NULL OR created_at >= $1) AND created_at < $2 LIMIT 1',
    [p.lo, p.hi],
  );
  return rows.length > 0;
}

/** Detaches (or finishes detaching) and drops a partition; the rows it held. */
async function dropPartition(client: pg.PoolClient, name: string, pending: boolean): Promise<number> {
  const table = client.escapeIdentifier(name);
  await client.query(`ALTER TABLE alteration_jobs DETACH PARTITION ${table} ${pending ? 'FINALIZE' : 'CONCURRENTLY'}`);
  // Detached, it is a table no request reads: its rows counted (estimated from the planner's statistics past
  // ESTIMATED_PAST rows: reading a week of millions of rows only to count them cost the sweep most of its time and
  // the requests beside it their cache), then dropped.
  const { rows: stats } = await client.query<{ n: number }>(
    'SELECT reltuples::float8 AS n FROM pg_class WHERE oid = $1::regclass',
    [name],
  );
  let n = Math.round(stats[0]!.n);
  if (n < ESTIMATED_PAST)
    n = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);
  await client.query(`DROP TABLE ${table}`);
  return n;
}

/**
 * The rows of plans that are gone from a week a kept plan holds: the plans found by walking the partition's key
 * (one index probe per plan, not a read of every row), each plan's rows deleted `batch` at a time.
 */
async function deletePurgedRows(
  client: pg.PoolClient,
  name: string,
  batch: number,
  stopped: () => boolean,
): Promise<number> {
  const table = client.escapeIdentifier(name);
  const { rows: gone } = await client.query<{ plan_id: string }>(
    `WITH RECURSIVE plans AS (
       (SELECT plan_id FROM ${table} ORDER BY plan_id LIMIT 1)
       UNION ALL
       SELECT (SELECT j.plan_id FROM ${table} j WHERE j.plan_id > plans.plan_id ORDER BY j.plan_id LIMIT 1)
         FROM plans WHERE plans.plan_id IS NOT NULL)
     SELECT plan_id FROM plans
      WHERE plan_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM alteration_job_sets s WHERE s.plan_id = plans.plan_id)`,
  );
  let deleted = 0;
  for (const { plan_id } of gone) {
    for (let n = batch; n === batch && !stopped();) {
      const r = await client.query(
        `DELETE FROM ${table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${table} WHERE plan_id = $1 LIMIT $2))`,
        [plan_id, batch],
      );
      n = r.rowCount ?? 0;
      deleted += n;
    }
  }
  return deleted;
}
