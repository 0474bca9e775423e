import {
  ActivityFailure,
  continueAsNew,
  sleep,
  defineSignal,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { CallActivities, CallResult } from '../activities/calls.js';
import { callsTaskQueue } from './task-queues.js';
import { TRANSIENT_RETRY } from './retry.js';
import { DEFINITION_ATTRIBUTE, INSTANCE_STATUS_ATTRIBUTE, PLAN_TENANT_ATTRIBUTE } from './search-attributes.js';

type StepResult = Awaited<ReturnType<Activities['executeInstanceStep']>>;
type StepRetryPolicy = NonNullable<StepResult['nextRetry']>;
const STEP_TIMEOUT = '10 minutes';
/** A call ends within its connection's timeoutMs (at most 300 s): this is only the backstop. */
const CALL_TIMEOUT = '6 minutes';
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

/**
 * Makes the outbound call a step started (`StepResult.call`) as an activity of the calls task queue, then
 * records its outcome. A call over its tenant's share on a worker comes back from the queue later (the
 * activity's retry, not counted here); a call that failed is made again as the activity's resilience
 * strategy says, with the strategy's backoff as a durable timer, before the fault becomes an incident.
 */
async function makeCall(instanceId: string, call: NonNullable<StepResult['call']>): Promise<StepResult> {
  const calls = proxyActivities<CallActivities>({
    taskQueue: callsTaskQueue(workflowInfo().taskQueue),
    startToCloseTimeout: CALL_TIMEOUT,
    heartbeatTimeout: STEP_HEARTBEAT,
    retry: TRANSIENT_RETRY,
  });
  let result: CallResult;
  for (let attempt = 1; ; attempt++) {
    try {
      result = await calls.callOutbound({
        instanceId,
        recordId: call.recordId,
        tenantKey: call.tenantKey,
        activityId: call.activityId,
      });
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      const why = err.cause?.message ?? err.message;
      result = {
        made: false,
        details: {
          instanceId,
          recordId: call.recordId,
          activityId: call.activityId,
          activityType: 'Elsa.Http.SendHttpRequest',
          connectionName: '',
        },
        outcome: { ok: false, error: `the call could not be made: ${why}` },
      };
      break;
    }
    const o = result.outcome;
    const failed = !o.ok || o.status < 200 || o.status > 299;
    const policy = call.retry;
    if (!result.made || !failed || !policy || attempt >= policy.maximumAttempts) break;
    await sleep(
      Math.min(policy.maximumIntervalMs, policy.initialIntervalMs * policy.backoffCoefficient ** (attempt - 1)),
    );
  }
  return steps.finishOutboundCall({ details: result.details, outcome: result.outcome });
}

export const workAvailable = defineSignal('workAvailable');

export interface InstanceExecutionInput {
  instanceId: string;
  /** The search attributes are registered: keep WorkflowInstanceStatus current. */
  searchAttributes?: boolean;
}

type Standing = NonNullable<Awaited<ReturnType<Activities['peekStep']>>['instance']>;

/** What a run did and where it left the instance: the workflow's result and its current details. */
export interface InstanceExecutionResult {
  /** The instance's state as this run left it, e.g. "Running/Suspended". */
  instance: string;
  /** "ran until suspended at `wait` (waiting on approve)", "ran to the end", … */
  summary: string;
  executedActivityIds: string[];
}

function describe(standing: Standing | undefined, executed: readonly string[]): string {
  if (!standing) return 'the instance no longer exists';
  const last = executed.length ? ` at \`${executed[executed.length - 1]}\`` : '';
  const ran = executed.length ? `ran ${executed.map((a) => `\`${a}\``).join(', ')}` : 'ran nothing';
  if (standing.status === 'Finished')
    return `${ran}; the instance ${standing.subStatus === 'Finished' ? 'finished' : `ended ${standing.subStatus}`}`;
  if (standing.subStatus === 'Suspended')
    return `${ran}; suspended${last}, waiting on ${standing.waitingOn.join(', ')}`;
  if (standing.subStatus === 'Faulted') return `${ran}; faulted${last} (see its incidents)`;
  return `${ran}; ${standing.status}/${standing.subStatus}`;
}

/**
 * Runs an instance's scheduled activities one step at a time until nothing is runnable. Postgres holds
 * the state; this workflow only drives it, so a crashed worker resumes at the next unexecuted step.
 * A `workAvailable` signal (dispatch) that arrives while running makes it look for work once more.
 */
export async function instanceExecution(input: InstanceExecutionInput): Promise<InstanceExecutionResult | void> {
  let signalled = false;
  setHandler(workAvailable, () => {
    signalled = true;
  });
  // Runs started before the metadata existed replay without it.
  const metadata = patched('instance-metadata-v1');
  const executed: string[] = [];
  let standing: Standing | undefined;
  let shownStatus: string | undefined;
  const show = (now: Standing | undefined) => {
    standing = now ?? standing;
    if (!metadata || !standing) return;
    const status = `${standing.status}/${standing.subStatus}`;
    if (input.searchAttributes && status !== shownStatus)
      upsertSearchAttributes([{ key: INSTANCE_STATUS_ATTRIBUTE, value: status }]);
    shownStatus = status;
    setCurrentDetails(`**${status}** · ${describe(standing, executed)}`);
  };
  const peeked = await steps.peekStep(input.instanceId);
  if (metadata && peeked.instance) {
    const i = peeked.instance;
    // A null memo value would remove the key: the default tenant is named as the UI names it.
    upsertMemo({
      instanceId: input.instanceId,
      definitionId: i.definitionId,
      version: i.version,
      tenant: i.tenantId ?? 'default',
    });
    if (input.searchAttributes) {
      upsertSearchAttributes([
        { key: DEFINITION_ATTRIBUTE, value: i.definitionId },
        { key: PLAN_TENANT_ATTRIBUTE, value: i.tenantId ?? 'default' },
      ]);
    }
  }
  show(peeked.instance);
  const result = (): InstanceExecutionResult | void =>
    metadata
      ? { instance: shownStatus ?? 'unknown', summary: describe(standing, executed), executedActivityIds: executed }
      : undefined;
  let policy = peeked.nextRetry;
  for (;;) {
    signalled = false;
    let step;
    // Outbound calls are left to this workflow (`callsApart`), to be made on the calls task queue. A run
    // started before that replays as it ran: its recorded step results carry no call.
    if (policy) {
      try {
        step = await stepsWith(policy).executeInstanceStep(input.instanceId, { callsApart: true });
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        // The strategy's attempts ran out on something other than the activity's own fault (its last
        // attempt records that as an incident): run the step once more as final, with the default policy.
        step = await steps.executeInstanceStep(input.instanceId, { finalAttempt: true, callsApart: true });
      }
    } else {
      step = await steps.executeInstanceStep(input.instanceId, { callsApart: true });
    }
    if (step.call) {
      show(step.instance);
      step = await makeCall(input.instanceId, step.call);
    }
    policy = step.nextRetry;
    if (step.executedActivityId) executed.push(step.executedActivityId);
    show(step.instance);
    if (!step.hasMoreWork && !signalled) return result();
    if (!step.hasMoreWork) policy = (await steps.peekStep(input.instanceId)).nextRetry;
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof instanceExecution>(input);
    }
  }
}
