import type pg from 'pg';
import { purgeAuditEntries } from '../audit/trail.js';
import type { Config } from '../config.js';
import { purgeFinishedInstances } from '../engine/instances.js';
import type { Logger } from '../logger.js';
import { sweepJobPartitions } from './job-partitions.js';
import { expiredPlans, purgePlan } from './plan-store/index.js';

/**
 * Retention (contract section 13): finished plans after PLAN_RETENTION_DAYS, their jobs with their week's partition
 * (src/alterations/job-partitions.ts), finished instances after INSTANCE_RETENTION_DAYS (when set), audit entries
 * after AUDIT_RETENTION_DAYS. Each worker sweeps every RETENTION_SWEEP_SECONDS, in small batches (each its own short
 * statement, so no lock is held long), a few plans of each tenant in a round (a tenant with a backlog takes no
 * other's turn). Sweeps on several workers at once only repeat each other's deletes; one sweeps the partitions.
 */

/** What one sweep removed. */
export interface Purged {
  plans: number;
  jobs: number;
  instances: number;
  auditEntries: number;
}

export interface RetentionObserver {
  retentionSwept(purged: Purged): void;
}

/** Plans of one tenant per round; rows per statement. */
const PLANS_PER_TENANT = 10;
const BATCH = 5000;

/** One sweep: every kind, until nothing past its days is left (or the sweep is stopped). */
export async function sweepRetention(
  pool: pg.Pool,
  settings: Config['retention'],
  stopped: () => boolean = () => false,
): Promise<Purged> {
  const purged: Purged = { plans: 0, jobs: 0, instances: 0, auditEntries: 0 };
  for (;;) {
    const plans = await expiredPlans(pool, settings.planDays, PLANS_PER_TENANT);
    for (const plan of plans) {
      if (stopped()) return purged;
      await purgePlan(pool, plan, settings.planDays);
      purged.plans++;
    }
    if (plans.length === 0) break;
  }
  // The purged plans' jobs go with their weeks' partitions.
  if (!stopped()) purged.jobs += await sweepJobPartitions(pool, BATCH, stopped);
  if (settings.instanceDays !== undefined) {
    for (let n = BATCH; n === BATCH && !stopped();) {
      n = await purgeFinishedInstances(pool, settings.instanceDays, BATCH);
      purged.instances += n;
    }
  }
  for (let n = BATCH; n === BATCH && !stopped();) {
    n = await purgeAuditEntries(pool, settings.auditDays, BATCH);
    purged.auditEntries += n;
  }
  return purged;
}

/** The sweep every RETENTION_SWEEP_SECONDS on a worker: its start and its stop (which waits for a sweep running). */
export function retentionSweeper(
  pool: pg.Pool,
  settings: Config['retention'],
  logger: Logger,
  observer?: RetentionObserver,
) {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopping = false;
  const run = () => {
    running ??= (async () => {
      try {
        const purged = await sweepRetention(pool, settings, () => stopping);
        observer?.retentionSwept(purged);
        if (purged.plans + purged.instances + purged.auditEntries > 0)
          logger.info({ purged, retention: settings }, 'retention: purged what was past its days');
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'retention: the sweep failed; it runs again later');
      } finally {
        running = undefined;
      }
    })();
  };
  return {
    start() {
      stopping = false;
      run();
      timer = setInterval(run, settings.sweepSeconds * 1000);
      timer.unref();
    },
    async stop() {
      stopping = true;
      clearInterval(timer);
      await running;
    },
  };
}
