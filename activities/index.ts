import { ApplicationFailure, Context } from '@temporalio/activity';
import { withHeartbeat } from './heartbeat.js';
import {
  completePlan,
  failPlan,
  pausePlanFor,
  readPlanControl,
  runJobBatch,
  steppedAside,
  type ProcessingDeps,
} from '../src/alterations/processing.js';
import { type GenerateOptions, generateJobs } from '../src/alterations/generation.js';
import { stepsAside } from '../src/alterations/step-aside.js';
import type { PauseReason } from '../src/alterations/model.js';
import { checkSchedule, expireApproval } from '../src/alterations/governance.js';
import { checkVerification } from '../src/alterations/verification.js';
import { ZodError } from 'zod';
import { isTransientError, sqlState } from '../src/db/errors.js';
import { NotFoundError, ValidationError } from '../src/errors.js';
import {
  type CallDetails,
  type EngineDeps,
  finishOutboundCall,
  orFault,
  peekStep,
  type ReadyCall,
  runStepOrFault,
  type StepResult,
} from '../src/engine/executor.js';
import type { HttpOutcome } from '../src/connections/http.js';
import { callArgs } from './call-args.js';
import type { CallMaker, CallResult } from './calls.js';

export interface ActivityDeps extends EngineDeps, ProcessingDeps {
  /**
   * What makes this worker's inline calls (`createCallMaker`, behind their `callOutbound`, src/temporal/worker.ts),
   * for a step of an instance's own workflow that starts a call marked `inline`: made in the same local activity,
   * as the step had it (`callInStep`).
   */
  callOutbound?: CallMaker;
}

/**
 * A step of the instance's own workflow (a local activity) that started a call marked `inline` with no resilience
 * strategy makes it itself, when its tenant has a place free (or one frees within the short wait every call gets), and records its outcome (running the pure
 * steps after it): one local activity where the workflow would run three (the step, `callOutbound`,
 * `finishOutboundCall`), with the same share, claim and Idempotency-Key. The workflow's code does not change: the
 * step's answer carries no `call` to make, so the workflow goes on as after any step, and a run recorded before
 * replays its own answers. Otherwise (no place, an earlier delivery still out, the call failing before it was made)
 * the answer is the started call, and the workflow makes it as before: waiting for a place, woken, falling back to
 * the calls queue.
 */
async function callInStep(
  deps: ActivityDeps,
  instanceId: string,
  step: StepResult,
  ready: ReadyCall | undefined,
): Promise<StepResult> {
  const call = step.call;
  if (!call || call.inline !== true || call.retry || !deps.callOutbound) return step;
  let made: CallResult;
  try {
    // As the step had it: the call's record, instance and connection are not read back.
    made = await deps.callOutbound(callArgs(instanceId, call, 'result', true), ready);
  } catch (err) {
    // Not made (its preparation or claim failed): the workflow makes it, retried there.
    deps.logger.warn({ err, instanceId }, 'an outbound call could not be made by its step; its workflow makes it');
    return step;
  }
  if (made.askAgainInMs !== undefined) return step;
  const finish = () =>
    orFault(deps, instanceId, () =>
      finishOutboundCall(deps, made.details, made.outcome, {
        ownWorkflow: true,
        ...(made.claim !== undefined ? { claim: made.claim } : {}),
      }),
    );
  // The call was made: a retry of the whole step would make it again (with the same Idempotency-Key), so the
  // recording of its outcome is retried here while the database is away, as the workflow's own last part would be.
  const giveUpAt = Date.now() + FINISH_GIVE_UP_MS;
  for (let waitMs = FINISH_FIRST_WAIT_MS; ; waitMs = Math.min(2 * waitMs, FINISH_LAST_WAIT_MS)) {
    try {
      return await finish();
    } catch (err) {
      if (!isTransientError(err) || Date.now() + waitMs > giveUpAt) throw err;
      deps.logger.warn({ err, instanceId }, "an outbound call's outcome could not be recorded yet; trying again");
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

/**
 * The waits between tries of the last part of a call made in its step: 0.5 s, doubling, at most 30 s, for at most
 * 5 minutes (half the step's timeout); then the step fails and its retry makes the call again.
 */
const FINISH_FIRST_WAIT_MS = 500;
const FINISH_LAST_WAIT_MS = 30_000;
const FINISH_GIVE_UP_MS = 5 * 60_000;

/**
 * Plan activities retry only what a retry can fix. A transient failure (database or Temporal unreachable,
 * a broken connection, a serialization failure, a pool timeout: `isTransientError`) is thrown as is and
 * Temporal retries it within the workflow's bounded policy. Anything else fails the same way every time
 * (bad data, SQLSTATE class 22; a failed constraint, 23; a stored plan that no longer parses; a bug), so it
 * becomes a non-retryable failure whose message says what went wrong, and the plan ends Failed with it.
 */
async function retryOnlyTransient<T>(what: string, fn: () => Promise<T>, logger?: ActivityDeps['logger']): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ApplicationFailure || isTransientError(err)) throw err;
    logger?.error({ err, activity: what }, 'plan activity failed with an error that a retry cannot fix');
    throw ApplicationFailure.nonRetryable(describeFailure(err), failureType(err));
  }
}

/** What a user should read in the plan's failureReason: the cause in words, never SQL or a stack. */
function describeFailure(err: unknown): string {
  if (err instanceof NotFoundError || err instanceof ValidationError) return err.message;
  if (err instanceof ZodError) {
    const first = err.issues[0];
    return `The stored plan is not valid: ${first ? `${first.path.join('.') || '(root)'}: ${first.message}` : err.message}`;
  }
  const state = sqlState(err);
  if (state?.startsWith('22'))
    return `A value of the plan cannot be processed by the database: ${(err as Error).message}`;
  if (state?.startsWith('23')) return `The plan's changes violate a database constraint: ${(err as Error).message}`;
  if (state) return `The database refused the plan's processing (SQLSTATE ${state}): ${(err as Error).message}`;
  return `Processing the plan failed: ${err instanceof Error ? err.message : String(err)}`;
}

function failureType(err: unknown): string {
  if (err instanceof ZodError) return 'InvalidPlan';
  const state = sqlState(err);
  if (state) return `SqlState${state}`;
  return err instanceof Error ? err.name : 'Error';
}

/**
 * Activity implementations, built with their dependencies in the worker entry point. Each is a thin
 * call into src/; the workflow code imports only the *type* of this factory's result.
 */
export function createActivities(deps: ActivityDeps) {
  return {
    /**
     * The next step of an instance. The second argument is `finalAttempt` (a boolean, as workflows started
     * before calls ran apart pass it) or options: with `callsApart` an outbound call is left to the
     * workflow (`StepResult.call`).
     */
    async executeInstanceStep(
      instanceId: string,
      options:
        boolean | { finalAttempt?: boolean; callsApart?: boolean; ownWorkflow?: boolean; plainOnly?: boolean } = false,
    ): Promise<StepResult> {
      if (!instanceId) throw ApplicationFailure.nonRetryable('instanceId is required', 'BadInput');
      const attempt = Context.current().info.attempt;
      const o = typeof options === 'boolean' ? { finalAttempt: options } : options;
      // Only a local step of the instance's own workflow: an activity task's worker keeps its slots for steps.
      const callsInStep = o.ownWorkflow === true && o.callsApart === true && Context.current().info.isLocal;
      let ready: ReadyCall | undefined;
      const onCallReady = (call: ReadyCall) => {
        ready = call;
      };
      const step = await withHeartbeat(() =>
        runStepOrFault(deps, instanceId, { attempt, ...o, ...(callsInStep ? { onCallReady } : {}) }),
      );
      return callsInStep ? callInStep(deps, instanceId, step, ready) : step;
    },
    /**
     * The last part of an outbound step made apart: its outcome recorded, the instance moved on.
     * `ownWorkflow`: see StepOptions (workflows that pass it show the result themselves).
     */
    finishOutboundCall(args: {
      details: CallDetails;
      outcome: HttpOutcome;
      ownWorkflow?: boolean;
    }): Promise<StepResult> {
      return orFault(deps, args.details.instanceId, () =>
        finishOutboundCall(deps, args.details, args.outcome, { ownWorkflow: args.ownWorkflow === true }),
      );
    },
    peekStep(instanceId: string) {
      return peekStep(deps, instanceId);
    },
    generateJobs(planId: string, opts?: GenerateOptions) {
      return withHeartbeat(() =>
        retryOnlyTransient('generateJobs', () => generateJobs(deps, planId, opts), deps.logger),
      );
    },
    runJobBatch(args: { planId: string; fromOrd: number; toOrd: number; notBefore?: number; mayStepAside?: boolean }) {
      const ctx = Context.current();
      // A second attempt re-dispatches what an interrupted first attempt may have committed but not dispatched.
      const redispatch = ctx.info.attempt > 1;
      const { notBefore, mayStepAside, ...range } = args;
      // In flight from the slot's start: a throttled batch waiting for its time holds the slot too.
      const ended = deps.planMetrics?.batchStarted();
      return withHeartbeat(async () => {
        // A throttled plan's batch starts at its time (sub-second spacing, which durable timers do not give).
        const wait = notBefore === undefined ? 0 : notBefore - Date.now();
        if (wait > 0) await ctx.sleep(Math.min(wait, 60_000));
        // Another tenant's plan is starting: this batch gives its slot back to it, once (src/alterations/step-aside.ts).
        if (mayStepAside && !redispatch && (await stepsAside(deps, range.planId, (ms) => ctx.sleep(ms))))
          return retryOnlyTransient('runJobBatch', () => steppedAside(deps, range.planId), deps.logger);
        return retryOnlyTransient('runJobBatch', () => runJobBatch(deps, { ...range, redispatch }), deps.logger);
      }).finally(() => ended?.());
    },
    /** The workflow pauses its plan: the canary is done, or too many jobs failed. */
    pausePlan(planId: string, reason: PauseReason) {
      return retryOnlyTransient('pausePlan', () => pausePlanFor(deps, planId, reason), deps.logger);
    },
    /** The plan's steering as its row says now (after a signal, or while paused). */
    planControl(planId: string) {
      return retryOnlyTransient('planControl', () => readPlanControl(deps, planId), deps.logger);
    },
    /**
     * Section 10: an approval's durable timer fired. The plan, undecided past its expiry, is Cancelled with
     * its approval Expired; answers its steering either way (a decision may have come first).
     */
    expireApproval(planId: string) {
      return retryOnlyTransient(
        'expireApproval',
        async () => {
          await expireApproval(deps.pool, planId, deps.clock?.() ?? new Date());
          return readPlanControl(deps, planId);
        },
        deps.logger,
      );
    },
    /**
     * Section 10: may the plan's batches start now? Outside every window a running plan is Paused
     * (pauseReason schedule, resumesAt); inside one, a plan paused by its schedule runs again. Answers when
     * that changes, and the plan's steering as the row now says.
     */
    checkSchedule(planId: string) {
      return retryOnlyTransient(
        'checkSchedule',
        async () => {
          const gate = await checkSchedule(deps.pool, planId, deps.clock?.() ?? new Date());
          return { ...gate, control: await readPlanControl(deps, planId) };
        },
        deps.logger,
      );
    },
    /**
     * Section 12: one check of a plan's effect (src/alterations/verification.ts): its completed jobs whose
     * instance matches `verify.expect` now are Verified, those past their time Unverified; answers how many are
     * still Pending and when the earliest one's time is up.
     */
    async checkVerification(planId: string) {
      const check = await retryOnlyTransient(
        'checkVerification',
        () => checkVerification(deps.pool, planId, deps.clock?.() ?? new Date()),
        deps.logger,
      );
      deps.planMetrics?.jobsVerified?.(check.newlyVerified ?? 0, check.newlyUnverified ?? 0);
      return check;
    },
    completePlan(planId: string) {
      return retryOnlyTransient('completePlan', () => completePlan(deps, planId), deps.logger);
    },
    async failPlan(planId: string, reason: string) {
      deps.logger.error({ planId, reason }, 'alteration plan failed: it could not be processed');
      await retryOnlyTransient('failPlan', () => failPlan(deps, planId, reason), deps.logger);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
