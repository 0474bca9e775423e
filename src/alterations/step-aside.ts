import type pg from 'pg';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';
import { PLAN_STATUS } from './model.js';

/**
 * A plan's batch steps aside for another tenant's plan that is starting. Batches are not preempted: a tenant's
 * small plan that arrives while a big plan of another tenant holds every batch slot waits for a batch in flight
 * to end, and its jobs' generation shares the cores with those batches (bench/README.md, the noisy neighbour).
 * So a batch, before it starts its work, looks for a plan of another tenant that is generating its jobs or has
 * them and no batch done yet, started in the last STARTING_MS: while one is generating it waits (its slot held,
 * no work done), at most WAIT_MS; then, if one is starting, it does nothing and gives its slot back, and the
 * plan runs its range again at once, without stepping aside a second time. The starting plan's batches, queued
 * by then and weighted by their plan's size, take the slot. A plan steps aside at most once per range for
 * each such start, and never for its own tenant's plans.
 */

/** A plan counts as starting this long after it started generating its jobs, at most. */
export const STARTING_MS = 10_000;
/** How long a batch waits, its slot held, for another tenant's plan to finish generating its jobs. */
export const WAIT_MS = 1_000;
/** How often it looks again meanwhile. */
const POLL_MS = 25;

type Starting = 'generating' | 'dispatching' | null;

/** Another tenant's plan starting: generating its jobs, or with its jobs and no batch done yet (or none). */
async function othersStarting(pool: pg.Pool, planId: string, since: Date): Promise<Starting> {
  const { rows } = await pool.query<{ generating: boolean | null; dispatching: boolean | null }>(
    `SELECT bool_or(p.status = $3) AS generating, bool_or(p.status = $4) AS dispatching
       FROM alteration_plans p
      WHERE p.status IN ($3, $4) AND p.started_at > $2
        AND p.tenant_id IS DISTINCT FROM (SELECT tenant_id FROM alteration_plans WHERE id = $1)`,
    [planId, since, PLAN_STATUS.Generating, PLAN_STATUS.Dispatching],
  );
  const r = rows[0];
  return r?.generating ? 'generating' : r?.dispatching ? 'dispatching' : null;
}

/**
 * Whether the plan's batch gives its slot back to another tenant's plan that is starting; waits (at most
 * WAIT_MS) while one is generating its jobs.
 */
export async function stepsAside(
  deps: { pool: pg.Pool; clock?: Clock },
  planId: string,
  sleep: (ms: number) => Promise<void>,
): Promise<boolean> {
  const until = Date.now() + WAIT_MS;
  for (;;) {
    const starting = await othersStarting(deps.pool, planId, new Date(nowBy(deps.clock).getTime() - STARTING_MS));
    if (starting === null) return false;
    if (starting === 'dispatching' || Date.now() >= until) return true;
    await sleep(POLL_MS);
  }
}
