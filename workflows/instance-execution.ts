import { continueAsNew, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { executeInstanceStep } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  // Database hiccups and worker crashes are retried; each retry runs whatever step is next in Postgres.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export const workAvailable = defineSignal('workAvailable');

export interface InstanceExecutionInput {
  instanceId: string;
}

/**
 * Runs an instance's scheduled activities one step at a time until nothing is runnable. Postgres holds
 * the state; this workflow only drives it, so a crashed worker resumes at the next unexecuted step.
 * A `workAvailable` signal (dispatch) that arrives while running makes it look for work once more.
 */
export async function instanceExecution(input: InstanceExecutionInput): Promise<void> {
  let signalled = false;
  setHandler(workAvailable, () => {
    signalled = true;
  });
  for (;;) {
    signalled = false;
    const step = await executeInstanceStep(input.instanceId);
    if (!step.hasMoreWork && !signalled) return;
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof instanceExecution>(input);
    }
  }
}
