import {
  ActivityFailure,
  continueAsNew,
  defineSignal,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { TRANSIENT_RETRY } from './retry.js';

type StepRetryPolicy = NonNullable<Awaited<ReturnType<Activities['executeInstanceStep']>>['nextRetry']>;
const STEP_TIMEOUT = '10 minutes';
// Steps heartbeat while they run: a worker that dies mid-step is noticed within this, and the retry runs
// whatever step is next in Postgres (the interrupted one committed all or nothing).
const STEP_HEARTBEAT = '10 seconds';

// Database hiccups and worker crashes are retried; each retry runs whatever step is next in Postgres.
const steps = proxyActivities<Activities>({
  startToCloseTimeout: STEP_TIMEOUT,
  heartbeatTimeout: STEP_HEARTBEAT,
  retry: TRANSIENT_RETRY,
});

/** A step whose activity names a resilience strategy runs under that strategy's retry policy. */
function stepsWith(policy: StepRetryPolicy) {
  return proxyActivities<Activities>({
    startToCloseTimeout: STEP_TIMEOUT,
    heartbeatTimeout: STEP_HEARTBEAT,
    retry: {
      maximumAttempts: policy.maximumAttempts,
      initialInterval: policy.initialIntervalMs,
      backoffCoefficient: policy.backoffCoefficient,
      maximumInterval: policy.maximumIntervalMs,
    },
  });
}

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
  let policy = (await steps.peekStep(input.instanceId)).nextRetry;
  for (;;) {
    signalled = false;
    let step;
    if (policy) {
      try {
        step = await stepsWith(policy).executeInstanceStep(input.instanceId);
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        // The strategy's attempts ran out on something other than the activity's own fault (its last
        // attempt records that as an incident): run the step once more as final, with the default policy.
        step = await steps.executeInstanceStep(input.instanceId, true);
      }
    } else {
      step = await steps.executeInstanceStep(input.instanceId);
    }
    policy = step.nextRetry;
    if (!step.hasMoreWork && !signalled) return;
    if (!step.hasMoreWork) policy = (await steps.peekStep(input.instanceId)).nextRetry;
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof instanceExecution>(input);
    }
  }
}
