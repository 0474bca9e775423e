import type pg from 'pg';
import type { Logger } from '../logger.js';
import { othersStarting } from './plan-store/index.js';

/**
 * A plan's batch steps aside for another tenant's plan that is starting. Batches are not preempted: a tenant's
 * small plan that arrives while a big plan of another tenant holds every batch slot waits for a batch in flight
 * to end, and its jobs' generation shares the cores with those batches (bench/README.md, the noisy neighbour).
 * So a batch the plan lets step aside (one in flight at a time, none for STEP_ASIDE_QUIET_MS after one did:
 * workflows/plan-scheduler.ts), before it starts its work, looks for a plan of another tenant that started
 * after its own plan, in the last STARTING_MS, and is generating its jobs or has them and no batch done yet.
 * While one is generating it waits (its slot held, no work done), at most WAIT_MS; then, if one is starting, it
 * does nothing and gives its slot back, and its plan runs the same range again next, without stepping aside a
 * second time. The starting plan's batches, queued by then and weighted by their plan's size, take the slot (if
 * the wait ran out first, the slot goes to whatever the queue holds). Never for the plan's own tenant's plans.
 * The time is the database's (`now()`), so workers' clocks do not matter; a plan whose start the database sees
 * in the future does not count.
 */

/** A plan counts as starting this long after it started generating its jobs, at most. */
export const STARTING_MS = 10_000;
/** How long a batch waits, its slot held, for another tenant's plan to finish generating its jobs. */
export const WAIT_MS = 1_000;
/** How often it looks again meanwhile. */
const POLL_MS = 25;

type Starting = Awaited<ReturnType<typeof othersStarting>>;

/**
 * Whether the plan's batch gives its slot back to another tenant's plan that is starting (another tenant's plan
 * generating its jobs, or with its jobs and no batch done yet, started since this one); waits (at most WAIT_MS)
 * while one is generating its jobs. Two plans that start together do not step aside for each other.
 */
export async function stepsAside(
  deps: { pool: pg.Pool; logger?: Logger },
  planId: string,
  sleep: (ms: number) => Promise<void>,
): Promise<boolean> {
  const until = Date.now() + WAIT_MS;
  for (;;) {
    let starting: Starting;
    try {
      starting = await othersStarting(deps.pool, planId, STARTING_MS);
    } catch (err) {
      // The batch goes on as if nothing were starting: giving way is a courtesy, never a reason to fail.
      deps.logger?.warn({ err, planId }, 'plan batch: could not look for starting plans of other tenants');
      return false;
    }
    if (starting === null) return false;
    if (starting === 'dispatching' || Date.now() >= until) return true;
    await sleep(POLL_MS);
  }
}
