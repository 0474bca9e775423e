import { ApplicationFailure, Context } from '@temporalio/activity';
import { completePlan, failPlan, generateJobs, runJobBatch, type ProcessingDeps } from '../src/alterations/plans.js';
import { ZodError } from 'zod';
import { NotFoundError, ValidationError } from '../src/errors.js';
import { peekStep, runStep, type EngineDeps, type StepResult } from '../src/engine/executor.js';

export interface ActivityDeps extends EngineDeps, ProcessingDeps {}

/** Bad input never gets better by retrying: it becomes a non-retryable failure; anything else retries. */
async function nonRetryableOnBadInput<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof NotFoundError || err instanceof ValidationError) throw ApplicationFailure.nonRetryable(err.message, err.name);
    // A stored plan that no longer parses (its alterations or filter) is bad input too.
    if (err instanceof ZodError) {
      const first = err.issues[0];
      throw ApplicationFailure.nonRetryable(`The stored plan is not valid: ${first ? `${first.path.join('.') || '(root)'}: ${first.message}` : err.message}`, 'InvalidPlan');
    }
    throw err;
  }
}

/**
 * Heartbeats while `fn` runs, so that the workflow's short heartbeat timeout notices a worker that died
 * mid-activity within seconds, while a slow but live activity (waiting on row locks) is left alone.
 */
async function withHeartbeat<T>(fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  ctx.heartbeat();
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
      return withHeartbeat(() => runStep(deps, instanceId, { attempt, finalAttempt }));
    },
    peekStep(instanceId: string) {
      return peekStep(deps, instanceId);
    },
    generateJobs(planId: string) {
      return withHeartbeat(() => nonRetryableOnBadInput(() => generateJobs(deps, planId)));
    },
    runJobBatch(args: { planId: string; fromOrd: number; toOrd: number }) {
      // A second attempt re-dispatches what an interrupted first attempt may have committed but not dispatched.
      const redispatch = Context.current().info.attempt > 1;
      return withHeartbeat(() => nonRetryableOnBadInput(() => runJobBatch(deps, { ...args, redispatch })));
    },
    completePlan(planId: string) {
      return completePlan(deps, planId);
    },
    async failPlan(planId: string, reason: string) {
      deps.logger.error({ planId, reason }, 'alteration plan failed: it could not be processed');
      await failPlan(deps, planId, reason);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
