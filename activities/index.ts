import { ApplicationFailure, Context } from '@temporalio/activity';
import { completePlan, failPlan, generateJobs, runJobBatch, type ProcessingDeps } from '../src/alterations/plans.js';
import { NotFoundError, ValidationError } from '../src/errors.js';
import { runStep, type EngineDeps, type StepResult } from '../src/engine/executor.js';

export interface ActivityDeps extends EngineDeps, ProcessingDeps {}

/** Bad input never gets better by retrying: it becomes a non-retryable failure; anything else retries. */
async function nonRetryableOnBadInput<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof NotFoundError || err instanceof ValidationError) throw ApplicationFailure.nonRetryable(err.message, err.name);
    throw err;
  }
}

/**
 * Activity implementations, built with their dependencies in the worker entry point. Each is a thin
 * call into src/; the workflow code imports only the *type* of this factory's result.
 */
export function createActivities(deps: ActivityDeps) {
  return {
    async executeInstanceStep(instanceId: string): Promise<StepResult> {
      if (!instanceId) throw ApplicationFailure.nonRetryable('instanceId is required', 'BadInput');
      return runStep(deps, instanceId);
    },
    generateJobs(planId: string) {
      return nonRetryableOnBadInput(() => generateJobs(deps, planId));
    },
    runJobBatch(args: { planId: string; fromOrd: number; toOrd: number }) {
      // A second attempt re-dispatches what an interrupted first attempt may have committed but not dispatched.
      const redispatch = Context.current().info.attempt > 1;
      return nonRetryableOnBadInput(() => runJobBatch(deps, { ...args, redispatch }));
    },
    completePlan(planId: string) {
      return completePlan(deps, planId);
    },
    failPlan(planId: string, reason: string) {
      return failPlan(deps, planId, reason);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
