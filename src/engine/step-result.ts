import type pg from 'pg';
import type { ConfigCipher } from '../connections/cipher.js';
import { type CallObserver, type OutboundPolicy } from '../connections/http.js';
import { isTransientError } from '../db/errors.js';
import type { HttpConnectionConfiguration } from '../connections/types.js';
import { OWN_STEP, type Queryable } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { DefinitionCache } from './definitions.js';
import { findActivity } from './flowchart.js';
import type { CallRequest } from './handlers/index.js';
import { type InstanceState } from './instance-state.js';
import { findResilienceStrategy, retryPolicyOf, type StepRetryPolicy } from './resilience.js';
import { type Clock } from '../vocabulary/clock.js';
import { tenantOut } from '../auth/principal.js';

/**
 * What a step of an instance answers and is asked with, and what its parts share (src/engine/executor.ts runs a step,
 * src/engine/call-steps.ts the parts of a step that calls out).
 */

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

/** An outbound call prepared by the first part of a step: recorded as started, not yet made. */
export interface PendingCall extends CallRequest {
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

/** `StepResult.told`, when the step found the instance ended as no word will tell its own workflow. */
export async function toldIfEnded(
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
export const markOf = (options: { ownWorkflow?: boolean }) => (options.ownWorkflow ? OWN_STEP : undefined);

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

/** A fault with attempts left under the activity's resilience strategy: the step is retried, not faulted. */
export function retryUnderStrategy(strategyId: string | undefined, options: StepOptions, message: string): void {
  const strategy = findResilienceStrategy(strategyId);
  if (strategy && !options.finalAttempt && (options.attempt ?? 1) < strategy.maxAttempts) {
    throw new RetryableActivityFault(
      `${message} (attempt ${options.attempt ?? 1} of ${strategy.maxAttempts} under ${strategy.id})`,
    );
  }
}

/** Where the instance stands after a step ran `activityId`. */
export async function stepResult(
  deps: EngineDeps,
  db: Queryable,
  s: InstanceState,
  activityId: string,
): Promise<StepResult> {
  // A call still out counts: the next step makes it again (`resumeStartedCall`), and migration 021 queues no
  // word after an own step that leaves one out, so the workflow must go on by itself.
  const hasMoreWork =
    s.status === 'Running' &&
    (s.subStatus as string) === 'Executing' &&
    (s.scheduled.length > 0 || (s.callsInFlight?.length ?? 0) > 0);
  const nextRetry = hasMoreWork ? await nextRetryPolicy(deps, db, s) : undefined;
  return { hasMoreWork, executedActivityId: activityId, instance: standingOf(s), ...(nextRetry ? { nextRetry } : {}) };
}

/** How many of a run's earlier activities a step result names (the rest are counted). */
export const ALSO_EXECUTED_NAMED = 20;
