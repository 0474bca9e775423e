import type pg from 'pg';
import { sendThroughConnection } from '../connections/http.js';
import { isTransientError } from '../db/errors.js';
import { type ConnectionJson, connectionByNameSql, connectionFromJson } from '../connections/repository.js';
import { resolveConnectionInput, selectedConnectionOf } from '../connections/resolve.js';
import { prepared, withTransaction } from '../db/pool.js';
import { type ActivityType, findActivityType } from './activity-types.js';
import type { ActivityNode } from './definition-schema.js';
import type { DefinitionVersion } from './definitions.js';
import { findActivity } from './flowchart.js';
import type { CallRequest } from './handlers/index.js';
import { callRequest } from './handlers/send-http-request.js';
import { evaluateInputs } from './inputs.js';
import {
  INSTANCE_COLUMNS,
  OUTBOUND_ACTIVITY_TYPE,
  instanceFromRow,
  type InstanceRow,
  type InstanceState,
  lockInstance,
  saveInstance,
} from './instance-state.js';
import { headIsPure, PURE_RUN_BUDGET_MS, PURE_STEPS_PER_CHUNK, runPureSteps, writePureSteps } from './pure-steps.js';
import { findResilienceStrategy, retryPolicyOf, type StepRetryPolicy } from './resilience.js';
import { runHandler, type StartedRecord, startedRecord, takeHead } from './step-core.js';
import { recordIncident, settle } from './transitions.js';
import { now as nowBy } from '../vocabulary/clock.js';
import { TimeSlice } from '../vocabulary/time-slice.js';

import {
  ALSO_EXECUTED_NAMED,
  type EngineDeps,
  type InstanceStanding,
  markOf,
  nextRetryPolicy,
  type PendingCall,
  RetryableActivityFault,
  retryUnderStrategy,
  standingOf,
  type StepOptions,
  type StepResult,
  stepResult,
  toldIfEnded,
} from './step-result.js';
import { finishCall, readyCall } from './call-steps.js';

export * from './step-result.js';
export { finishOutboundCall, prepareCall } from './call-steps.js';

/** What the workflow needs before its first step: the retry policy of the activity to run first. */
export async function peekStep(
  deps: EngineDeps,
  instanceId: string,
): Promise<{ nextRetry?: StepRetryPolicy; instance?: InstanceStanding }> {
  const { rows } = await deps.pool.query<InstanceRow>(
    `SELECT ${INSTANCE_COLUMNS} FROM workflow_instances WHERE id = $1`,
    [instanceId],
  );
  if (!rows[0]) return {};
  const s = instanceFromRow(rows[0]);
  const nextRetry = await nextRetryPolicy(deps, deps.pool, s);
  return { instance: standingOf(s), ...(nextRetry ? { nextRetry } : {}) };
}

/**
 * Executes the next scheduled activity of one instance. Most activities run in one transaction: lock the
 * row, run the activity, write the activity record, journal and new state, schedule successors. A retried
 * call after a crash finds the committed state and runs the *next* step, so no step's effect is recorded
 * twice.
 *
 * An activity that calls out (Send HTTP Request) runs in three parts, so that no network call is made
 * while a transaction or row lock is held (a slow endpoint would otherwise hold a connection and the
 * instance's lock for its whole timeout): (1) record it as started (a Running activity record) and
 * commit; (2) call, holding nothing; (3) in a new transaction, re-check the instance and record the
 * outcome. A retry after a crash between (1) and (3) finds the started record and calls again with the
 * same Idempotency-Key (`{instanceId}:{recordId}`), so the receiver can tell.
 */
export async function runStep(deps: EngineDeps, instanceId: string, options: StepOptions = {}): Promise<StepResult> {
  const first = await withTransaction(
    deps.pool,
    (client) => beginStep(deps, client, instanceId, options),
    markOf(options),
  );
  if (first.kind === 'done')
    return first.result.hasMoreWork
      ? continuePureSteps(deps, instanceId, first.result, PURE_RUN_BUDGET_MS, options)
      : first.result;
  const ready = readyCall(first);
  if (options.callsApart) {
    options.onCallReady?.(ready);
    return {
      hasMoreWork: true,
      instance: first.standing,
      call: {
        recordId: first.recordId,
        activityId: first.activityId,
        tenantKey: first.tenantKey,
        ...(first.connectionName ? { connectionName: first.connectionName } : {}),
        ...(first.retry ? { retry: first.retry } : {}),
        ...(callsInline(deps, first.configuration) ? { inline: true as const } : {}),
      },
    };
  }
  const outcome = await sendThroughConnection(ready.connection, ready.request, deps.outbound, deps.callMetrics);
  return withTransaction(deps.pool, (client) => finishCall(deps, client, first, outcome, options), markOf(options));
}

/**
 * The call's connection answers within the worker's bound for calls made inside a workflow task
 * (WORKER_INLINE_CALL_MAX_MS; 0 or absent: never). A configuration without its timeout is not inline.
 */
export function callsInline(deps: Pick<EngineDeps, 'inlineCallMaxMs'>, configuration: Record<string, unknown>) {
  const max = deps.inlineCallMaxMs ?? 0;
  const timeoutMs = configuration.timeoutMs;
  return max > 0 && typeof timeoutMs === 'number' && timeoutMs <= max;
}

/**
 * After a step, the pure steps that follow it (src/engine/pure-steps.ts: WriteLine, SetVariable, Event, …) run
 * here too, as a change's transaction runs them inline, instead of one activity call each: in chunks of
 * PURE_STEPS_PER_CHUNK, each chunk one transaction (the row locked, the steps run in memory, their records and
 * journal lines written with one statement each, the instance saved), for at most PURE_RUN_BUDGET_MS of chunks.
 * It stops at the first step that is not pure (an outbound call, a step under a resilience strategy), when the
 * instance waits or ends, or when the budget is spent; the result is the last chunk's, and `hasMoreWork` says
 * whether the workflow calls again. A retry after a crash finds the committed chunks and goes on from there.
 */
export async function continuePureSteps(
  deps: EngineDeps,
  instanceId: string,
  after: StepResult,
  budgetMs = PURE_RUN_BUDGET_MS,
  options: Pick<StepOptions, 'ownWorkflow'> = {},
): Promise<StepResult> {
  const started = performance.now();
  // Between steps and chunks, other work on this worker gets the event loop (no more than ~15 ms at a time).
  const slice = new TimeSlice();
  let result = after;
  // Every activity this call ran, for the workflow's account of them (`alsoExecuted`): counted, the last few named.
  let count = 0;
  const ran: string[] = [];
  const note = (activityId: string | undefined) => {
    if (activityId === undefined) return;
    count++;
    ran.push(activityId);
    if (ran.length > ALSO_EXECUTED_NAMED + 1) ran.shift();
  };
  note(after.executedActivityId);
  while (result.hasMoreWork && !result.nextRetry && performance.now() - started < budgetMs) {
    const next = await withTransaction(
      deps.pool,
      async (client) => {
        const s = await lockInstance(client, instanceId);
        // Calls out on another branch: left to the step executor, which resumes a started call first.
        if (!s || s.callsInFlight?.length) return undefined;
        const def = await deps.definitions.byVersionId(client, s.definitionVersionId);
        if (!def || !headIsPure(s, def)) return undefined;
        const now = nowBy(deps.clock);
        const writes = await runPureSteps(client, deps.definitions, [s], now, undefined, slice, PURE_STEPS_PER_CHUNK);
        const last = writes.records[writes.records.length - 1];
        if (!last) return undefined;
        await writePureSteps(client, writes);
        await saveInstance(client, s);
        for (const r of writes.records) note(r.activity_id);
        return stepResult(deps, client, s, last.activity_id);
      },
      markOf(options),
    );
    if (!next) break;
    result = next;
  }
  // The last one is the result's executedActivityId; the others ran before it in this call.
  return count > 1 ? { ...result, alsoExecuted: { count: count - 1, last: ran.slice(0, -1) } } : result;
}

/** `runStep`, faulting the instance on an error no retry can fix (`orFault`). */
export async function runStepOrFault(
  deps: EngineDeps,
  instanceId: string,
  options: StepOptions = {},
): Promise<StepResult> {
  return orFault(deps, instanceId, () => runStep(deps, instanceId, options));
}

/**
 * Runs a part of a step; an error that no retry can fix (bad data, a failed constraint, a header Node
 * refuses to send, a bug) faults the instance with an incident naming the reason, in its own transaction,
 * instead of being retried by Temporal forever. Transient errors and strategy retries are thrown on.
 */
export async function orFault(
  deps: EngineDeps,
  instanceId: string,
  part: () => Promise<StepResult>,
): Promise<StepResult> {
  try {
    return await part();
  } catch (err) {
    if (err instanceof RetryableActivityFault || isTransientError(err)) throw err;
    deps.logger.error(
      { err, instanceId },
      'workflow instance step failed with an error a retry cannot fix; the instance is faulted',
    );
    const message = `The step failed: ${err instanceof Error ? err.message : String(err)}`;
    const now = nowBy(deps.clock);
    // Where it stands goes with the answer, as with every step's: a workflow whose own earlier attempt finished
    // the instance completes on it (no word follows that end, migration 020).
    const instance = await withTransaction(deps.pool, async (client) => {
      const s = await lockInstance(client, instanceId);
      if (!s || s.status === 'Finished') return s && standingOf(s);
      const { rows } = await client.query<{ id: string; activity_id: string; activity_type: string }>(
        `UPDATE activity_records SET status = 'Faulted', completed_at = $2
          WHERE instance_id = $1 AND status = 'Running' AND activity_type = $3 RETURNING id, activity_id, activity_type`,
        [instanceId, now, OUTBOUND_ACTIVITY_TYPE],
      );
      const activityId = rows[0]?.activity_id ?? s.scheduled[0] ?? 'unknown';
      const def = await deps.definitions.byVersionId(client, s.definitionVersionId);
      const activityType =
        rows[0]?.activity_type ?? (def ? findActivity(def.root, activityId)?.type : undefined) ?? 'unknown';
      recordIncident(s, activityId, activityType, message, now);
      s.updatedAt = now;
      await saveInstance(client, s);
      return standingOf(s);
    });
    return { hasMoreWork: false, ...(instance ? { instance } : {}) };
  }
}

type StepStart = { kind: 'done'; result: StepResult } | PendingCall;

/**
 * Part one of a step, in a transaction holding the instance's row lock: a call an earlier attempt started is
 * made again (`resumeStartedCall`); otherwise the activity at the head of the schedule runs (`runHead`).
 */
async function beginStep(
  deps: EngineDeps,
  client: pg.PoolClient,
  instanceId: string,
  options: StepOptions,
): Promise<StepStart> {
  const s = await lockInstance(client, instanceId);
  // Where it stands goes with the answer: a workflow whose own earlier attempt finished the instance (its
  // marker lost with a worker) completes on it, as no word of that end comes (migration 020).
  if (!s) return done({ hasMoreWork: false });
  if (s.status === 'Finished' || s.subStatus === 'Faulted')
    return done({ hasMoreWork: false, instance: standingOf(s), ...(await toldIfEnded(deps, client, s, options)) });
  const now = nowBy(deps.clock);
  s.updatedAt = now;
  const def = await deps.definitions.byVersionId(client, s.definitionVersionId);
  if (!def) throw new Error(`Definition version ${s.definitionVersionId} of instance ${s.id} is missing`);
  const resumed = await resumeStartedCall(deps, client, s, def, now);
  if (resumed) return resumed;
  if (options.plainOnly) {
    const nextRetry = await nextRetryPolicy(deps, client, s);
    if (nextRetry) return done({ hasMoreWork: true, nextRetry, instance: standingOf(s) });
  }
  const activityId = takeHead(s);
  if (activityId === undefined) {
    settle(s, now);
    await saveInstance(client, s);
    return done({ hasMoreWork: false, instance: standingOf(s) });
  }
  const activity = findActivity(def.root, activityId);
  const type = activity ? findActivityType(activity.type) : undefined;
  if (!activity || !type) {
    const message = activity
      ? `Activity type ${activity.type} is not available on this worker`
      : `Activity ${activityId} does not exist in version ${def.version} of ${def.definitionId}`;
    recordIncident(s, activityId, activity?.type ?? 'unknown', message, now);
    await saveInstance(client, s);
    return done({ hasMoreWork: false, executedActivityId: activityId, instance: standingOf(s) });
  }
  return runHead(deps, client, { s, def, activity, type, now }, options);
}

const done = (result: StepResult): StepStart => ({ kind: 'done', result });

/** The call an outbound step asks for, with where it stands: what part two makes and part three records. */
function pendingCall(s: InstanceState, activity: ActivityNode, recordId: string, call: CallRequest): PendingCall {
  const strategy = findResilienceStrategy(activity.resilienceStrategyId);
  return {
    ...call,
    instanceId: s.id,
    tenantKey: s.tenantKey,
    recordId,
    activityId: activity.id,
    activityType: activity.type,
    standing: standingOf(s),
    ...(strategy ? { retry: retryPolicyOf(strategy) } : {}),
  };
}

/**
 * A call started by an earlier attempt whose outcome was never recorded: made again, same key. One that can
 * no longer be made (the definition or connection changed) has its record closed Faulted, and the step goes
 * on with the schedule.
 */
async function resumeStartedCall(
  deps: EngineDeps,
  client: pg.PoolClient,
  s: InstanceState,
  def: DefinitionVersion,
  now: Date,
): Promise<PendingCall | undefined> {
  // The lock read the calls in flight: none, and none can start while the lock is held (part one runs under it).
  if (s.callsInFlight?.length === 0) return undefined;
  const { rows: started } = await client.query<{ id: string; activity_id: string }>(
    `SELECT id, activity_id FROM activity_records WHERE instance_id = $1 AND status = 'Running' AND activity_type = $2
      ORDER BY started_at LIMIT 1`,
    [s.id, OUTBOUND_ACTIVITY_TYPE],
  );
  const record = started[0];
  if (!record) return undefined;
  const activity = findActivity(def.root, record.activity_id);
  const type = activity ? findActivityType(activity.type) : undefined;
  if (activity && type) {
    const inputs = evaluateInputs(type, activity, def, s.variables);
    const connection = await resolveConnectionInput(client, deps.cipher, deps.logger, s.tenantKey, type, inputs, {
      instanceId: s.id,
      activityId: activity.id,
    });
    if (connection?.configuration && typeof inputs.method === 'string' && typeof inputs.path === 'string')
      return pendingCall(s, activity, record.id, callRequest(connection.name ?? '', connection.configuration, inputs));
  }
  await client.query(`UPDATE activity_records SET status = 'Faulted', completed_at = $2 WHERE id = $1`, [
    record.id,
    now,
  ]);
  s.callsInFlight = s.callsInFlight?.filter((id) => id !== record.activity_id);
  return undefined;
}

/**
 * Runs the activity just taken off the schedule (the step core, src/engine/step-core.ts): its record
 * inserted Running, its handler run with the record and journal written in this transaction. An activity
 * that calls out ends part one with its record Running; any other settles the instance.
 */
async function runHead(
  deps: EngineDeps,
  client: pg.PoolClient,
  step: { s: InstanceState; def: DefinitionVersion; activity: ActivityNode; type: ActivityType; now: Date },
  options: StepOptions,
): Promise<StepStart> {
  const { s, def, activity, type, now } = step;
  const inputs = evaluateInputs(type, activity, def, s.variables);
  // The connection the inputs select is read with the record's insert: one round trip for both.
  const connectionName = selectedConnectionOf(type, inputs);
  const started = await insertStartedRecord(client, s, startedRecord(def, activity, type, inputs), now, connectionName);
  const recordId = started.id;
  const connection = await resolveConnectionInput(
    client,
    deps.cipher,
    deps.logger,
    s.tenantKey,
    type,
    inputs,
    { instanceId: s.id, activityId: activity.id },
    connectionName !== undefined
      ? { name: connectionName, connection: () => connectionFromJson(started.connection ?? null, deps.cipher) }
      : undefined,
  );
  const call = await runHandler(
    { s, def, activity, inputs, connection, now },
    {
      finishRecord: (status) =>
        client.query('UPDATE activity_records SET status = $2, completed_at = $3 WHERE id = $1', [
          recordId,
          status,
          now,
        ]),
      cancelOthers: () =>
        client.query(
          `UPDATE activity_records SET status = 'Canceled', completed_at = $3
            WHERE instance_id = $1 AND status = 'Running' AND id <> $2`,
          [s.id, recordId, now],
        ),
      writeJournal: (message) =>
        client.query(
          'INSERT INTO journal_entries (instance_id, activity_id, message, timestamp) VALUES ($1, $2, $3, $4)',
          [s.id, activity.id, message, now],
        ),
    },
    (message) => retryUnderStrategy(activity.resilienceStrategyId, options, message),
  );
  if (call) {
    // Part one ends here: the record is Running and the activity left the schedule; commit, then call.
    await saveInstance(client, s);
    return pendingCall(s, activity, recordId, call);
  }
  settle(s, now);
  await saveInstance(client, s);
  if ((s.subStatus as string) === 'Faulted')
    deps.logger.warn({ instanceId: s.id, activityId: activity.id }, 'workflow instance faulted');
  return done(await stepResult(deps, client, s, activity.id));
}

/** Inserts the step's record Running; with `connectionName`, reads that connection in the same statement. */
async function insertStartedRecord(
  client: pg.PoolClient,
  s: InstanceState,
  r: StartedRecord,
  now: Date,
  connectionName?: string,
): Promise<{ id: string; connection?: ConnectionJson | null }> {
  const insert = `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, inputs, started_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'Running', $7::jsonb, $8) RETURNING id`;
  const values = [s.id, s.tenantKey, r.activityId, r.nodeId, r.activityType, r.name, JSON.stringify(r.inputs), now];
  const { rows } = await client.query<{ id: string; connection?: ConnectionJson | null }>(
    connectionName === undefined
      ? prepared(insert, values)
      : prepared(
          `WITH record AS (${insert})
           SELECT record.id, ${connectionByNameSql('$2', '$9')} AS connection FROM record`,
          [...values, connectionName],
        ),
  );
  return rows[0]!;
}
