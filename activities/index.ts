import { ApplicationFailure, Context } from '@temporalio/activity';
import {
  completePlan,
  failPlan,
  generateJobs,
  pausePlan,
  readPlanControl,
  runJobBatch,
  type ProcessingDeps,
} from '../src/alterations/processing.js';
import type { PauseReason } from '../src/alterations/model.js';
import { ZodError } from 'zod';
import { isTransientError, sqlState } from '../src/db/errors.js';
import { NotFoundError, ValidationError } from '../src/errors.js';
import { peekStep, runStepOrFault, type EngineDeps, type StepResult } from '../src/engine/executor.js';

export interface ActivityDeps extends EngineDeps, ProcessingDeps {}

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
 * Heartbeats while `fn` runs, so that the workflow's short heartbeat timeout notices a worker that died
 * mid-activity within seconds, while a slow but live activity (waiting on row locks) is left alone. The
 * first heartbeat comes after 2 s: the timeout runs from the activity's start, and most activities (a
 * batch takes about half a second) end before it, saving the server a heartbeat write per activity.
 */
async function withHeartbeat<T>(fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  // A local activity has no heartbeat (its workflow task's timeout watches it).
  if (ctx.info.isLocal) return fn();
  const timer = setInterval(() => ctx.heartbeat(), 2_000);
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}

/**
 * Activity implementations, built with their dependencies in the worker entry point. Each is a thin
 * call into src/; the workflow code imports only the *type* of this factory's result.
 */
export function createActivities(deps: ActivityDeps) {
  return {
    async executeInstanceStep(instanceId: string, finalAttempt = false): Promise<StepResult> {
      if (!instanceId) throw ApplicationFailure.nonRetryable('instanceId is required', 'BadInput');
      const attempt = Context.current().info.attempt;
      return withHeartbeat(() => runStepOrFault(deps, instanceId, { attempt, finalAttempt }));
    },
    peekStep(instanceId: string) {
      return peekStep(deps, instanceId);
    },
    generateJobs(planId: string) {
      return withHeartbeat(() => retryOnlyTransient('generateJobs', () => generateJobs(deps, planId), deps.logger));
    },
    runJobBatch(args: { planId: string; fromOrd: number; toOrd: number; notBefore?: number }) {
      const ctx = Context.current();
      // A second attempt re-dispatches what an interrupted first attempt may have committed but not dispatched.
      const redispatch = ctx.info.attempt > 1;
      const { notBefore, ...range } = args;
      return withHeartbeat(async () => {
        // A throttled plan's batch starts at its time (sub-second spacing, which durable timers do not give).
        const wait = notBefore === undefined ? 0 : notBefore - Date.now();
        if (wait > 0) await ctx.sleep(Math.min(wait, 60_000));
        return retryOnlyTransient('runJobBatch', () => runJobBatch(deps, { ...range, redispatch }), deps.logger);
      });
    },
    /** The workflow pauses its plan: the canary is done, or too many jobs failed. */
    pausePlan(planId: string, reason: PauseReason) {
      return retryOnlyTransient('pausePlan', () => pausePlan(deps, planId, reason), deps.logger);
    },
    /** The plan's steering as its row says now (after a signal, or while paused). */
    planControl(planId: string) {
      return retryOnlyTransient('planControl', () => readPlanControl(deps, planId), deps.logger);
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
