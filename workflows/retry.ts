import { ActivityFailure, isCancellation, TemporalFailure } from '@temporalio/workflow';

/**
 * How activities are retried. Activities throw what a retry cannot fix as non-retryable
 * (`ApplicationFailure.nonRetryable`), so a retry policy only ever meets transient failures: a database or
 * Temporal that is briefly away, a worker that died mid-activity.
 */
export const TRANSIENT_RETRY = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '30 seconds',
} as const;

/**
 * Plan activities: the same backoff, but not forever. 20 attempts ride out about eight minutes of a
 * database or worker outage; past that the plan ends Failed with the last error instead of hanging.
 */
export const PLAN_RETRY = { ...TRANSIENT_RETRY, maximumAttempts: 20 } as const;

/**
 * Whether `err` is an activity's failure once its retries are over (not a cancellation, not a bug of the workflow's
 * own code). An activity task's comes as an ActivityFailure around its cause; a local activity's comes as the cause
 * itself, with nothing around it (the plan workflow's `planFailureReason` reads it so too).
 */
export function activityGaveUp(err: unknown, local: boolean): boolean {
  return local ? err instanceof TemporalFailure && !isCancellation(err) : err instanceof ActivityFailure;
}
