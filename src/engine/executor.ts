import type pg from 'pg';
import type { ConfigCipher } from '../connections/cipher.js';
import {
  type CallObserver,
  type HttpOutcome,
  type OutboundPolicy,
  sendThroughConnection,
} from '../connections/http.js';
import { isTransientError } from '../db/errors.js';
import { type ConnectionJson, connectionByNameSql, connectionFromJson } from '../connections/repository.js';
import { resolveConnectionInput, selectedConnectionOf } from '../connections/resolve.js';
import type { HttpConnectionConfiguration } from '../connections/types.js';
import { OWN_STEP, prepared, type Queryable, withTransaction } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { type ActivityType, findActivityType } from './activity-types.js';
import type { ActivityNode } from './definition-schema.js';
import type { DefinitionCache, DefinitionVersion } from './definitions.js';
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
  lockInstanceAndRecord,
  saveInstance,
} from './instance-state.js';
import {
  headIsPure,
  PURE_RUN_BUDGET_MS,
  PURE_STEPS_PER_CHUNK,
  type PureWrites,
  runPureSteps,
  writePureSteps,
} from './pure-steps.js';
import { findResilienceStrategy, retryPolicyOf, type StepRetryPolicy } from './resilience.js';
import { runHandler, type StartedRecord, startedRecord, takeHead } from './step-core.js';
import { recordIncident, scheduleSuccessors, settle } from './transitions.js';
import { convertValue, isVariableType } from './values.js';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';
import { TimeSlice } from '../vocabulary/time-slice.js';
import { tenantOut } from '../auth/principal.js';

export interface EngineDeps {
  pool: pg.Pool;
  definitions: DefinitionCache;
  logger: Logger;
  /** Decrypts connection configurations when an activity's connection input is resolved. */
  cipher: ConfigCipher;
  /** Where HTTP activities may connect (OUTBOUND_HTTP_ALLOW_NETWORKS); default: public addresses only. */
  outbound?: OutboundPolicy;
  /** Counts and times outbound calls for the operator's metrics (src/metrics/service-metrics.ts). */
  callMetrics?: CallObserver | undefined;
  clock?: Clock;
  /**
   * Where an instance stands, as the relay would tell its workflow (src/temporal/instance-tidings.ts, given by
   * the worker): for `StepResult.told`. Without it a step tells nothing of its own.
   */
  tidings?: (db: Queryable, instanceId: string) => Promise<StepTidings | undefined>;
  /**
   * With `callsApart`: a call whose connection's timeoutMs is at most this is marked `inline` for the workflow
   * (WORKER_INLINE_CALL_MAX_MS; 0 or absent: none).
   */
  inlineCallMaxMs?: number;
}

/**
 * The word an instance's workflow is told (workflows/instance-execution.ts `InstanceTidings`, whose `story` the
 * workflow's layer types), as the relay sends it and a step's answer carries it.
 */
export interface StepTidings {
  revision: number;
  status: string;
  subStatus: string;
  version: number;
  /** The instance has work that needs its workflow: an outbound call, or a step a resilience strategy retries. */
  hasWork: boolean;
  /** Events it waits on, as `eventName (activityId)` (with `story`, the first few: `story.bookmarks` counts them). */
  waitingOn?: string[];
  story?: unknown;
}

/** Where an instance stands after a step: what its execution workflow shows in the Temporal UI. */
export interface InstanceStanding {
  definitionId: string;
  version: number;
  /** The API's tenant id (null: the default tenant). */
  tenantId: string | null;
  status: string;
  subStatus: string;
  /** Events it waits on, as `eventName (activityId)`. */
  waitingOn: string[];
}

export function standingOf(s: InstanceState): InstanceStanding {
  return {
    definitionId: s.definitionId,
    version: s.version,
    tenantId: tenantOut(s.tenantKey),
    status: s.status,
    subStatus: s.subStatus,
    waitingOn: s.bookmarks.map((b) => `${b.eventName} (${b.activityId})`),
  };
}

export interface StepResult {
  /** The instance after this step. */
  instance?: InstanceStanding;
  /** true while the instance has scheduled work it can run now, or an outbound call out that a step makes again. */
  hasMoreWork: boolean;
  /** The activity that ran in this step, if any (the last one, when the step ran a run of pure steps). */
  executedActivityId?: string;
  /**
   * A run of pure steps after the step (`continuePureSteps`): how many activities ran before
   * `executedActivityId` in this call, and the last few of them in order (bounded: a run may be thousands).
   */
  alsoExecuted?: { count: number; last: string[] };
  /** The retry policy of the next step's activity, when it names a resilience strategy. */
  nextRetry?: StepRetryPolicy;
  /**
   * With `callsApart`: the step started an outbound call (its record is Running) that the workflow makes
   * next, as an activity of the calls task queue, then hands to `finishOutboundCall`. Names only, no secret.
   */
  call?: {
    recordId: string;
    activityId: string;
    tenantKey: string;
    /** The connection it resolved: the calls activity reads it with the record (`prepareCall`). */
    connectionName?: string;
    retry?: StepRetryPolicy;
    /**
     * The connection's timeoutMs is at most the worker's WORKER_INLINE_CALL_MAX_MS: the workflow may make the call
     * as a local activity inside its task (runs from patch level 3 do) rather than on the calls task queue.
     */
    inline?: true;
  };
  /**
   * To the instance's own workflow (`ownWorkflow`), when the step found the instance already Finished/Finished:
   * where it stands and its story, as the relay would tell it. An earlier attempt of this workflow's own step
   * ended it and its answer was lost (a failed workflow task runs its local activities again), and no word
   * follows an own step's end (migration 020), so without this the workflow's result would miss what ran.
   */
  told?: StepTidings;
}

export interface StepOptions {
  /** Temporal's attempt number of this step (1 for the first). */
  attempt?: number;
  /** Record a fault as an incident now, whatever attempts the activity's strategy allows. */
  finalAttempt?: boolean;
  /**
   * Leave an outbound call to the workflow (`StepResult.call`) instead of making it here: the call then
   * runs in the calls task queue's own slots, never in a slot a plan batch or another step needs.
   */
  callsApart?: boolean;
  /**
   * Run by the instance's own workflow, which shows where the step left the instance from its result: the
   * step's transactions queue no word to that workflow (migration 020 names the changes that still do).
   */
  ownWorkflow?: boolean;
  /**
   * Run the head of the schedule only if no resilience strategy names it; a head under a strategy is left
   * for the caller to run under the strategy's policy (`StepResult.nextRetry`, nothing ran). The workflow's
   * first step asks so, instead of reading the policy in a step of its own first.
   */
  plainOnly?: boolean;
  /**
   * Given the call the step started, ready to make as `prepareCall` would read it back (in this process only: the
   * step's answer, which goes into the workflow's history, never carries the connection's configuration).
   */
  onCallReady?: (call: ReadyCall) => void;
}

/** `StepResult.told`, when the step found the instance ended as no word will tell its own workflow. */
async function toldIfEnded(
  deps: EngineDeps,
  db: Queryable,
  s: InstanceState,
  options: StepOptions,
): Promise<Pick<StepResult, 'told'>> {
  if (!deps.tidings || !options.ownWorkflow || s.status !== 'Finished' || s.subStatus !== 'Finished') return {};
  // In the step's transaction: a read that fails rolls back to here only. Without the savepoint its failed
  // statement would fail the transaction, and the step's COMMIT with it (src/db/pool.ts withTransaction).
  await db.query('SAVEPOINT told_if_ended');
  try {
    const told = await deps.tidings(db, s.id);
    await db.query('RELEASE SAVEPOINT told_if_ended');
    return told ? { told } : {};
  } catch (err) {
    // Only what it names is missed: the workflow still completes on the standing the answer carries.
    if (isTransientError(err)) throw err;
    await db.query('ROLLBACK TO SAVEPOINT told_if_ended');
    return {};
  }
}

/** The mark of a step's transactions (`StepOptions.ownWorkflow`). */
const markOf = (options: { ownWorkflow?: boolean }) => (options.ownWorkflow ? OWN_STEP : undefined);

/**
 * Thrown when an activity with a resilience strategy faults and has attempts left: the step's
 * transaction rolls back (the attempt leaves no trace) and Temporal retries it with the strategy's policy.
 */
export class RetryableActivityFault extends Error {
  override name = 'RetryableActivityFault';
}

/** The retry policy for running the activity at the head of the schedule, if it names a strategy. */
export async function nextRetryPolicy(
  deps: Pick<EngineDeps, 'definitions'>,
  db: Queryable,
  s: InstanceState,
): Promise<StepRetryPolicy | undefined> {
  const head = s.scheduled[0];
  if (head === undefined || s.status !== 'Running' || s.subStatus === 'Faulted') return undefined;
  const def = await deps.definitions.byVersionId(db, s.definitionVersionId);
  const strategy = def ? findResilienceStrategy(findActivity(def.root, head)?.resilienceStrategyId) : undefined;
  return strategy ? retryPolicyOf(strategy) : undefined;
}

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

/** An outbound call prepared by the first part of a step: recorded as started, not yet made. */
interface PendingCall extends CallRequest {
  instanceId: string;
  tenantKey: string;
  recordId: string;
  activityId: string;
  activityType: string;
  /** Where the instance stands with the call started. */
  standing?: InstanceStanding;
  /** The retry policy of the calling activity's resilience strategy, if it names one. */
  retry?: StepRetryPolicy;
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

/** How many of a run's earlier activities a step result names (the rest are counted). */
const ALSO_EXECUTED_NAMED = 20;

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

/** What the last part of an outbound step needs to know of its call: names and ids, never a secret. */
export interface CallDetails {
  instanceId: string;
  recordId: string;
  activityId: string;
  activityType: string;
  connectionName: string;
  resultVariable?: string | undefined;
}

/** A started call ready to make: what `prepareCall` reads back, or what the step that started it had. */
export type ReadyCall = Extract<PreparedCall, { kind: 'call' }>;

/** The call a step just started, as `prepareCall` would read it back after the step's commit. */
function readyCall(c: PendingCall): ReadyCall {
  return {
    kind: 'call',
    tenantKey: c.tenantKey,
    details: {
      instanceId: c.instanceId,
      recordId: c.recordId,
      activityId: c.activityId,
      activityType: c.activityType,
      connectionName: c.connectionName,
      ...(c.resultVariable ? { resultVariable: c.resultVariable } : {}),
    },
    connection: c.configuration as HttpConnectionConfiguration,
    request: { method: c.method, path: c.path, body: c.body, idempotencyKey: `${c.instanceId}:${c.recordId}` },
  };
}

/**
 * A started call as `prepareCall` reads it back (no transaction or lock), or, ready to make (`ReadyCall`), as the
 * step that started it had it.
 */
export type PreparedCall =
  /** Make it. */
  | {
      kind: 'call';
      tenantKey: string;
      details: CallDetails;
      connection: HttpConnectionConfiguration;
      request: { method: string; path: string; body?: unknown; idempotencyKey: string };
    }
  /** Nothing to call: the instance moved on (finished, cancelled, faulted, the record closed) or cannot call any more. */
  | { kind: 'skip'; details: CallDetails; why?: string };

/**
 * Part two of an outbound step made apart (`callsApart`): the started call read back from Postgres, as the
 * first part recorded it (inputs evaluated again from the instance's variables, the connection resolved by
 * name in the tenant), with nothing held: no transaction, no row lock.
 */
export async function prepareCall(
  deps: EngineDeps,
  instanceId: string,
  recordId: string,
  /** The connection the first part resolved (`StepResult.call.connectionName`): read in the same round trip. */
  connectionName?: string,
): Promise<PreparedCall> {
  // The record, its instance and the connection the call named in one round trip (nothing is locked: part three
  // re-checks both under the lock). Inputs are evaluated again below; a connection they no longer name is read apart.
  const hinted = connectionName !== undefined;
  const { rows } = await deps.pool.query<
    InstanceRow & {
      record: { activity_id: string; activity_type: string; status: string } | null;
      connection?: ConnectionJson | null;
    }
  >(
    prepared(
      `SELECT ${INSTANCE_COLUMNS},
              (SELECT json_build_object('activity_id', r.activity_id, 'activity_type', r.activity_type, 'status', r.status)
                 FROM activity_records r WHERE r.id = $2 AND r.instance_id = $1) AS record
              ${hinted ? `, ${connectionByNameSql('workflow_instances.tenant_id', '$3')} AS connection` : ''}
         FROM workflow_instances WHERE id = $1`,
      hinted ? [instanceId, recordId, connectionName] : [instanceId, recordId],
    ),
  );
  const record = rows[0]?.record ?? undefined;
  const details: CallDetails = {
    instanceId,
    recordId,
    activityId: record?.activity_id ?? 'unknown',
    activityType: record?.activity_type ?? OUTBOUND_ACTIVITY_TYPE,
    connectionName: '',
  };
  const s = rows[0] ? instanceFromRow(rows[0]) : undefined;
  if (!s || !record || record.status !== 'Running' || s.status === 'Finished' || s.subStatus === 'Faulted')
    return { kind: 'skip', details };
  const def = await deps.definitions.byVersionId(deps.pool, s.definitionVersionId);
  const activity = def ? findActivity(def.root, record.activity_id) : undefined;
  const type = activity ? findActivityType(activity.type) : undefined;
  if (!def || !activity || !type) return { kind: 'skip', details, why: 'its activity no longer exists' };
  const inputs = evaluateInputs(type, activity, def, s.variables);
  const connection = await resolveConnectionInput(
    deps.pool,
    deps.cipher,
    deps.logger,
    s.tenantKey,
    type,
    inputs,
    { instanceId, activityId: activity.id },
    hinted
      ? { name: connectionName, connection: () => connectionFromJson(rows[0]!.connection ?? null, deps.cipher) }
      : undefined,
  );
  details.connectionName = connection?.name ?? '';
  if (typeof inputs.resultVariable === 'string' && inputs.resultVariable)
    details.resultVariable = inputs.resultVariable;
  if (!connection?.configuration || typeof inputs.method !== 'string' || typeof inputs.path !== 'string')
    return { kind: 'skip', details, why: 'its connection or inputs no longer resolve' };
  return {
    kind: 'call',
    tenantKey: s.tenantKey,
    details,
    connection: connection.configuration as HttpConnectionConfiguration,
    request: {
      method: inputs.method,
      path: inputs.path,
      body: inputs.body,
      idempotencyKey: `${instanceId}:${recordId}`,
    },
  };
}

/**
 * Part three of an outbound step made apart: the outcome recorded as `runStep` would (the instance locked
 * and re-checked). A strategy's retries were the workflow's, so a fault here is final.
 */
export async function finishOutboundCall(
  deps: EngineDeps,
  details: CallDetails,
  outcome: HttpOutcome,
  /** `claim`: the delivery's claim on the call, given back with the outcome (`lockInstanceAndRecord`). */
  options: Pick<StepOptions, 'ownWorkflow'> & { claim?: string } = {},
): Promise<StepResult> {
  return withTransaction(
    deps.pool,
    (client) => finishCall(deps, client, details, outcome, { ...options, finalAttempt: true }),
    markOf(options),
  );
}

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

/** A fault with attempts left under the activity's resilience strategy: the step is retried, not faulted. */
function retryUnderStrategy(strategyId: string | undefined, options: StepOptions, message: string): void {
  const strategy = findResilienceStrategy(strategyId);
  if (strategy && !options.finalAttempt && (options.attempt ?? 1) < strategy.maxAttempts) {
    throw new RetryableActivityFault(
      `${message} (attempt ${options.attempt ?? 1} of ${strategy.maxAttempts} under ${strategy.id})`,
    );
  }
}

async function stepResult(deps: EngineDeps, db: Queryable, s: InstanceState, activityId: string): Promise<StepResult> {
  // A call still out counts: the next step makes it again (`resumeStartedCall`), and migration 021 queues no
  // word after an own step that leaves one out, so the workflow must go on by itself.
  const hasMoreWork =
    s.status === 'Running' &&
    (s.subStatus as string) === 'Executing' &&
    (s.scheduled.length > 0 || (s.callsInFlight?.length ?? 0) > 0);
  const nextRetry = hasMoreWork ? await nextRetryPolicy(deps, db, s) : undefined;
  return { hasMoreWork, executedActivityId: activityId, instance: standingOf(s), ...(nextRetry ? { nextRetry } : {}) };
}

/**
 * Part three of an outbound step: the instance is locked again and re-checked. When it changed meanwhile
 * so that this call no longer belongs to its execution (finished, cancelled, faulted, or the record was
 * closed by an alteration), only the activity record notes the outcome; otherwise the outcome is applied
 * as the one-transaction step would have.
 */
async function finishCall(
  deps: EngineDeps,
  client: pg.PoolClient,
  call: CallDetails,
  outcome: HttpOutcome,
  options: StepOptions & { claim?: string },
): Promise<StepResult> {
  const now = nowBy(deps.clock);
  const { s, recordStatus } = await lockInstanceAndRecord(client, call.instanceId, call.recordId, options.claim);
  const finishRecord = (status: 'Completed' | 'Faulted') =>
    client.query(
      prepared(`UPDATE activity_records SET status = $2, completed_at = $3 WHERE id = $1 AND status = 'Running'`, [
        call.recordId,
        status,
        now,
      ]),
    );
  const succeeded = outcome.ok && outcome.status >= 200 && outcome.status <= 299;
  if (!s || recordStatus !== 'Running' || s.status === 'Finished' || s.subStatus === 'Faulted') {
    if (recordStatus === 'Running') await finishRecord(succeeded ? 'Completed' : 'Faulted');
    deps.logger.info(
      { instanceId: call.instanceId, activityId: call.activityId },
      'outbound call finished after its instance moved on; outcome recorded on the activity record only',
    );
    // Where the instance stands now: a retried last part whose first attempt committed finds the record
    // closed and the instance moved on, with the work its outcome scheduled still to run.
    return s
      ? { ...(await stepResult(deps, client, s, call.activityId)), ...(await toldIfEnded(deps, client, s, options)) }
      : { hasMoreWork: false, executedActivityId: call.activityId };
  }
  s.updatedAt = now;
  // This call's outcome is recorded below (a retry keeps it out): the others still out keep the instance running.
  const othersOut = s.callsInFlight?.filter((id) => id !== call.activityId);
  const def = await deps.definitions.byVersionId(client, s.definitionVersionId);
  if (!def) throw new Error(`Definition version ${s.definitionVersionId} of instance ${s.id} is missing`);
  const strategyId = findActivity(def.root, call.activityId)?.resilienceStrategyId;
  const fault = async (message: string) => {
    // With attempts left, the record stays Running: the retry calls again with the same Idempotency-Key.
    retryUnderStrategy(strategyId, options, message);
    recordIncident(s, call.activityId, call.activityType, message, now);
    await finishRecord('Faulted');
  };
  if (!outcome.ok) {
    await fault(`HTTP request through connection "${call.connectionName}" failed: ${outcome.error}`);
  } else {
    let stored = true;
    if (call.resultVariable) {
      const variable = def.variables.find((v) => v.id === call.resultVariable);
      const converted =
        variable && isVariableType(variable.typeName) ? convertValue(variable.typeName, outcome.status) : undefined;
      if (!variable || !converted?.ok) {
        stored = false;
        await fault(`Variable with ID ${call.resultVariable} cannot hold the status code`);
      } else {
        s.variables[call.resultVariable] = converted.value;
      }
    }
    if (stored && !succeeded)
      await fault(`HTTP request through connection "${call.connectionName}" returned status ${outcome.status}`);
    else if (stored) {
      await finishRecord('Completed');
      scheduleSuccessors(s, def, call.activityId, 'Done');
    }
  }
  s.callsInFlight = othersOut;
  settle(s, now);
  const after = othersOut?.length ? undefined : await pureStepsAfterCall(deps, client, s, def, now, call.activityId);
  const state = after?.state ?? s;
  await saveInstance(client, state);
  if ((state.subStatus as string) === 'Faulted')
    deps.logger.warn({ instanceId: s.id, activityId: call.activityId }, 'workflow instance faulted');
  if (!after) return stepResult(deps, client, s, call.activityId);
  const ran = [call.activityId, ...after.ran];
  const last = ran[ran.length - 1]!;
  return {
    ...(await stepResult(deps, client, state, last)),
    alsoExecuted: { count: ran.length - 1, last: ran.slice(-ALSO_EXECUTED_NAMED - 1, -1) },
  };
}

/**
 * The pure steps the call's outcome scheduled (one chunk, PURE_STEPS_PER_CHUNK), run in the last part's own
 * transaction as `continuePureSteps` would run them in transactions of their own: one step activity and one
 * transaction fewer for a call followed by pure steps. They run on a copy of the state: one failing with an error
 * no retry fixes leaves them to the next step, which faults the instance naming that step, and the call's
 * outcome stays recorded.
 */
async function pureStepsAfterCall(
  deps: EngineDeps,
  client: pg.PoolClient,
  s: InstanceState,
  def: DefinitionVersion,
  now: Date,
  activityId: string,
): Promise<{ state: InstanceState; ran: string[] } | undefined> {
  if (!headIsPure(s, def)) return undefined;
  const state = structuredClone(s);
  let writes: PureWrites;
  try {
    // In memory (the definitions aside): nothing is written until every step of the chunk has run.
    writes = await runPureSteps(client, deps.definitions, [state], now, undefined, undefined, PURE_STEPS_PER_CHUNK);
  } catch (err) {
    if (isTransientError(err)) throw err;
    deps.logger.warn(
      { err, instanceId: s.id, activityId },
      'the steps after an outbound call could not run with its outcome; they run as the next step',
    );
    return undefined;
  }
  if (writes.records.length === 0) return undefined;
  await writePureSteps(client, writes);
  return { state, ran: writes.records.map((r) => r.activity_id) };
}
