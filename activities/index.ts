import { ApplicationFailure } from '@temporalio/activity';
import { runStep, type EngineDeps, type StepResult } from '../src/engine/executor.js';

/**
 * Activity implementations, built with their dependencies in the worker entry point. Each is a thin
 * call into src/; the workflow code imports only the *type* of this factory's result.
 */
export function createActivities(deps: EngineDeps) {
  return {
    async executeInstanceStep(instanceId: string): Promise<StepResult> {
      if (!instanceId) throw ApplicationFailure.nonRetryable('instanceId is required', 'BadInput');
      return runStep(deps, instanceId);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
