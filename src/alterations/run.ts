import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import type { DefinitionCache } from '../engine/definitions.js';
import type { AlterableState } from '../engine/instance-state.js';
import { type ApplyOutcome, applyAlterations, entry, hasRunnableWork, lockInstances, saveInstances } from './apply.js';
import { type Alteration, LOG_LEVEL, type LogEntry } from './model.js';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';
import { TimeSlice } from '../vocabulary/time-slice.js';

export interface RunResult {
  workflowInstanceId: string;
  isSuccessful: boolean;
  workflowHasScheduledWork: boolean;
  log: LogEntry[];
}

export interface RunDeps {
  pool: pg.Pool;
  definitions: DefinitionCache;
  clock?: Clock;
}

/** What to do to one instance: alterations to apply (and a step after they all succeeded), or a refusal. */
type Prepared = { alterations: Alteration[]; onSuccess?: (s: AlterableState) => void } | { refuse: LogEntry };

/**
 * Alters the tenant's instances with these ids, one result per distinct id in request order: all in one
 * transaction with the rows locked in id order, each instance atomic on its own. The work the alterations
 * scheduled runs in that transaction as far as it is pure, and what needs an instance's workflow is in
 * the outbox (migration 011) when this returns: "dispatched", durably.
 */
async function alterEach(
  deps: RunDeps,
  tenantKey: string,
  requested: readonly string[],
  prepare: (s: AlterableState, now: Date) => Prepared,
): Promise<RunResult[]> {
  const ids = [...new Set(requested)];
  const now = nowBy(deps.clock);
  const results = await withTransaction(deps.pool, async (client) => {
    const instances = await lockInstances(client, tenantKey, ids);
    const ctx = { db: client, definitions: deps.definitions, now };
    const outcomes: ApplyOutcome[] = [];
    // One time slice over every instance (src/vocabulary/time-slice.ts).
    const slice = new TimeSlice();
    for (const id of ids) {
      const s = instances.get(id);
      const prepared: Prepared = s ? prepare(s, now) : { alterations: [] };
      if ('refuse' in prepared) {
        outcomes.push({ ok: false, log: [prepared.refuse], cancelled: false });
        continue;
      }
      const outcome = await applyAlterations(s, id, prepared.alterations, ctx, slice);
      if (outcome.ok && outcome.state && prepared.onSuccess) prepared.onSuccess(outcome.state);
      outcomes.push(outcome);
    }
    // What the alterations left scheduled, before it runs (the result says the work was dispatched).
    const scheduled = ids.map((id, i) => {
      const s = outcomes[i]!.state ?? instances.get(id);
      return s ? hasRunnableWork(s) : false;
    });
    await saveInstances(client, deps.definitions, outcomes, now, instances, slice);
    return ids.map((id, i): RunResult => ({
      workflowInstanceId: id,
      isSuccessful: outcomes[i]!.ok,
      workflowHasScheduledWork: scheduled[i]!,
      log: outcomes[i]!.log,
    }));
  });
  return results;
}

/** `POST /alterations/run`: the alterations applied now to explicit instances. */
export function runAlterations(
  deps: RunDeps,
  tenantKey: string,
  ids: readonly string[],
  alterations: readonly Alteration[],
) {
  return alterEach(deps, tenantKey, ids, () => ({ alterations: [...alterations] }));
}

/**
 * Retry: each activity to retry (the given ones, else every activity with an incident) is scheduled
 * again, its incidents are cleared and the instance leaves Faulted; then it is dispatched.
 */
export function retryInstances(
  deps: RunDeps,
  tenantKey: string,
  ids: readonly string[],
  activityIds?: readonly string[],
) {
  return alterEach(deps, tenantKey, ids, (s, now) => {
    const toRetry =
      activityIds && activityIds.length > 0
        ? [...new Set(activityIds)]
        : [...new Set(s.incidents.map((i) => i.activityId))];
    if (s.status === 'Finished') {
      return {
        refuse: entry(
          `Workflow instance ${s.id} is finished`,
          LOG_LEVEL.Error,
          'Alteration ScheduleActivity failed',
          now,
        ),
      };
    }
    if (toRetry.length === 0) {
      return { refuse: entry(`Workflow instance ${s.id} has no incidents to retry`, LOG_LEVEL.Warning, null, now) };
    }
    return {
      alterations: toRetry.map((activityId) => ({ type: 'ScheduleActivity' as const, activityId })),
      onSuccess(altered) {
        altered.incidents = altered.incidents.filter((i) => !toRetry.includes(i.activityId));
        if (altered.subStatus === 'Faulted') altered.subStatus = 'Pending';
      },
    };
  });
}
