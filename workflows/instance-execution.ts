import {
  ActivityFailure,
  condition,
  continueAsNew,
  isCancellation,
  makeContinueAsNewFunc,
  sleep,
  defineSignal,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { CallActivities, CallResult } from '../activities/calls.js';
import { callsTaskQueue } from './task-queues.js';
import { activityGaveUp, TRANSIENT_RETRY } from './retry.js';
import {
  DEFINITION_ATTRIBUTE,
  INSTANCE_STATUS_ATTRIBUTE,
  PLAN_IDS_ATTRIBUTE,
  PLAN_IDS_KEPT,
  PLAN_TENANT_ATTRIBUTE,
} from './search-attributes.js';
import {
  type InstanceStory,
  type StoryResult,
  STORY_LIMITS,
  clip,
  noSteps,
  stepRan,
  storyLine,
  storyResult,
  withSteps,
} from './instance-story.js';

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

/**
 * The same steps as local activities (behind LOCAL_STEPS_PATCH): they touch only Postgres, so they run inside
 * the workflow task on the worker that holds it, recorded as a marker, with no activity task through the
 * server and no workflow task after each. An instance with one outbound call went from six workflow tasks and
 * four activity tasks to three and one. A worker that dies mid-step fails the workflow task; the next attempt
 * runs whatever step is next in Postgres, as before.
 */
const localSteps = proxyLocalActivities<Activities>({ startToCloseTimeout: STEP_TIMEOUT, retry: TRANSIENT_RETRY });

/** Attempts of an inline call inside its workflow task before it goes through the calls task queue instead. */
const INLINE_CALL_ATTEMPTS = 5;

/**
 * An outbound call made inside the workflow task, as a local activity of the main worker (behind INLINE_CALLS_PATCH),
 * when the step's first part marked it `inline`: its connection answers within WORKER_INLINE_CALL_MAX_MS. The same
 * activity as on the calls task queue, with the same tenant share, claim and turn-back; what it saves is the
 * activity task through the server and the workflow task after it. A call to a connection with a longer timeout
 * stays on the calls task queue, in slots of its own, so that no slow endpoint holds a workflow task for long.
 */
const inlineCalls = proxyLocalActivities<CallActivities>({
  startToCloseTimeout: CALL_TIMEOUT,
  // About 15 s of retries inside the task (1, 2, 4, 8 s), then the call goes on through the calls task queue.
  retry: { ...TRANSIENT_RETRY, maximumAttempts: INLINE_CALL_ATTEMPTS },
});

/** The steps' retry policy of a resilience strategy. */
const strategyRetry = (policy: StepRetryPolicy) => ({
  maximumAttempts: policy.maximumAttempts,
  initialInterval: policy.initialIntervalMs,
  backoffCoefficient: policy.backoffCoefficient,
  maximumInterval: policy.maximumIntervalMs,
});

/** A step whose activity names a resilience strategy runs under that strategy's retry policy. */
function stepsWith(policy: StepRetryPolicy, local: boolean) {
  if (local)
    return proxyLocalActivities<Activities>({ startToCloseTimeout: STEP_TIMEOUT, retry: strategyRetry(policy) });
  return proxyActivities<Activities>({
    startToCloseTimeout: STEP_TIMEOUT,
    heartbeatTimeout: STEP_HEARTBEAT,
    retry: strategyRetry(policy),
  });
}

/**
 * Makes the outbound call a step started (`StepResult.call`) as an activity of the calls task queue, or inside
 * this workflow task as a local activity when `inline` (its first part marked it so, and the run takes
 * INLINE_CALLS_PATCH), then records its outcome. A call the worker turned back (its tenant's share full, an
 * earlier delivery still out) is asked again after the delay the worker names (not counted here); a call that
 * failed is made again as the activity's resilience strategy says, with the strategy's backoff as a durable
 * timer, before the fault becomes an incident.
 */
async function makeCall(
  instanceId: string,
  call: NonNullable<StepResult['call']>,
  local: boolean,
  inbox?: Inbox,
  inline = false,
): Promise<StepResult> {
  const queued = () =>
    proxyActivities<CallActivities>({
      taskQueue: callsTaskQueue(workflowInfo().taskQueue),
      startToCloseTimeout: CALL_TIMEOUT,
      heartbeatTimeout: STEP_HEARTBEAT,
      retry: TRANSIENT_RETRY,
    });
  let calls = inline ? inlineCalls : queued();
  let result: CallResult;
  for (let attempt = 1; ; attempt++) {
    // A wake that came for an earlier wait is spent: only one sent after this ask counts.
    if (inbox) inbox.placeFreed = false;
    try {
      // As activities/call-args.ts asks (workflow code imports activity types only).
      result = await calls.callOutbound({
        instanceId,
        recordId: call.recordId,
        tenantKey: call.tenantKey,
        activityId: call.activityId,
        turnBack: inbox ? 'wake' : 'result',
        ...(call.connectionName !== undefined ? { connectionName: call.connectionName } : {}),
      });
    } catch (err) {
      // An inline call that kept failing before it was made (its preparation or claim, the database away; a
      // worker without the activity) goes on as an activity task of the calls queue, retried there without
      // holding this task.
      if (calls === inlineCalls && activityGaveUp(err, true)) {
        calls = queued();
        attempt--;
        continue;
      }
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
    // Turned back (the tenant's share of the worker is full, or an earlier delivery of this call is still
    // out): nothing was sent. Asked again after a durable timer rather than an activity retry, so waiting
    // is neither a failed attempt nor one of the strategy's (activities/calls.ts says why).
    if (result.askAgainInMs !== undefined) {
      // The worker wakes it when a place frees (`callPlaceFreed`); the timer is only the longest wait (a run
      // that asked with 'wake', CALL_WAKE_PATCH; a worker of a release before answers without `wakes`).
      if (result.wakes && inbox) {
        const waiting = inbox;
        if (!waiting.placeFreed) await condition(() => waiting.placeFreed === true, result.askAgainInMs);
      } else await sleep(result.askAgainInMs);
      attempt--;
      continue;
    }
    const o = result.outcome;
    const failed = !o.ok || o.status < 200 || o.status > 299;
    const policy = call.retry;
    if (!result.made || !failed || !policy || attempt >= policy.maximumAttempts) break;
    await sleep(
      Math.min(policy.maximumIntervalMs, policy.initialIntervalMs * policy.backoffCoefficient ** (attempt - 1)),
    );
  }
  return (local ? localSteps : steps).finishOutboundCall({
    details: result.details,
    outcome: result.outcome,
    ...(local ? { ownWorkflow: true } : {}),
  });
}

/** The word's fields as a step's answer carries them (src/engine/executor.ts `StepTidings`). */
type StepTidings = NonNullable<Awaited<ReturnType<Activities['executeInstanceStep']>>['told']>;

/**
 * What the outbox relay tells an instance's workflow (src/temporal/outbox-relay.ts): where the instance
 * stands after a change committed in Postgres (its fields: `StepTidings`, the shape a step's answer carries too).
 * `revision` orders them: an older word is ignored.
 */
export interface InstanceTidings extends StepTidings {
  /**
   * What Postgres holds beyond the status (workflows/instance-story.ts): its definition, what ran, its
   * incidents, what made the change. Relays of the release before told no story.
   */
  story?: InstanceStory;
}

/** Sent by the relay with where the instance stands; runs of the previous release took it without arguments. */
export const workAvailable = defineSignal<[InstanceTidings?]>('workAvailable');

/**
 * Sent by the calls worker that turned this run's outbound call back over its tenant's share, when a place it
 * could take frees there (src/shares.ts `PlaceWaiters`): the call asks again now rather than when its timer is due.
 */
export const callPlaceFreed = defineSignal('callPlaceFreed');

export interface InstanceExecutionInput {
  instanceId: string;
  /** The search attributes are registered: keep WorkflowInstanceStatus current. */
  searchAttributes?: boolean;
  /** Carried over by continue-as-new: what the run before knew and showed. */
  known?: InstanceTidings;
  /**
   * The first word, given at the start: the relay starts a new instance's workflow with where the instance
   * stands instead of signalling it (one request, and eager: the first task comes back to its own worker).
   */
  told?: InstanceTidings;
  /** The patches this run takes without asking `patched()` (PATCH_LEVEL); runs recorded before have none. */
  patchLevel?: number;
}

type Standing = NonNullable<Awaited<ReturnType<Activities['peekStep']>>['instance']>;

/**
 * What a run did and where it left the instance: the workflow's result and its current details. Told with
 * the story (patch `instance-story`), the result is the instance's as Postgres holds it (`StoryResult`:
 * `executedActivityIds` its last activity records, wherever they ran); before it, this run's own steps.
 */
export type InstanceExecutionResult =
  | StoryResult
  | {
      /** The instance's state as this run left it, e.g. "Running/Suspended". */
      instance: string;
      /** "ran until suspended at `wait` (waiting on approve)", "ran to the end", … */
      summary: string;
      executedActivityIds: string[];
    };

/** The activities a step result names, in the order they ran: a run of pure steps first, then the last one. */
function ranIn(step: { executedActivityId?: string; alsoExecuted?: { last: string[] } }): string[] {
  return [...(step.alsoExecuted?.last ?? []), ...(step.executedActivityId ? [step.executedActivityId] : [])];
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

/** Where the instance stands, in the words of the lifelong workflow's details and result. */
function standingIn(t: InstanceTidings | undefined, executed: readonly string[]): string {
  const ran = executed.length ? `; this workflow ran ${executed.map((a) => `\`${a}\``).join(', ')}` : '';
  if (!t) return 'waiting for the instance to be told';
  if (t.status === 'Finished') return `${t.subStatus === 'Finished' ? 'finished' : `ended ${t.subStatus}`}${ran}`;
  if (t.subStatus === 'Suspended') return `suspended, waiting on ${(t.waitingOn ?? []).join(', ') || 'an event'}${ran}`;
  if (t.subStatus === 'Faulted') return `faulted (see its incidents)${ran}`;
  return `${t.status}/${t.subStatus}${ran}`;
}

/** The lifelong shape (below); runs without its marker are per-dispatch runs of the previous release. */
const LIFELONG_PATCH = 'instance-lifelong-v1';
/** A per-dispatch run still open at the upgrade ends by continuing as the lifelong shape. */
const HANDOVER_PATCH = 'instance-lifelong-handover';
/** Steps as local activities, and a run that ends by itself when its step finished the instance. */
const LOCAL_STEPS_PATCH = 'instance-local-steps';
/**
 * Details and result tell the instance's story as the relay's word carries it (what ran inside Postgres too,
 * its definition and version, its bookmarks, its incidents, who cancelled it), not only this run's steps.
 */
const STORY_PATCH = 'instance-story';
/**
 * A call turned back over its tenant's share asks with `turnBack: 'wake'` and waits for the calls worker's
 * `callPlaceFreed` (or its timer) instead of its timer alone. A run that takes it can record a cancelled timer
 * and a signal where a worker without it records the timer firing: the patch keeps a run of each kind on its code.
 */
const CALL_WAKE_PATCH = 'instance-call-wake';
/**
 * A call its first part marked `inline` is made as a local activity inside the workflow task (`inlineCalls`), not
 * on the calls task queue: a marker where a run without it records an activity task and a workflow task.
 */
const INLINE_CALLS_PATCH = 'instance-inline-calls';
/** A word that names the plan that made the change adds it to the search attribute AlterationPlanIds. */
const PLAN_IDS_PATCH = 'instance-plan-ids';
/**
 * The patches a run takes without asking `patched()`, by the level of the release that started it: the relay
 * starts every new run with `patchLevel: PATCH_LEVEL`, so that its history carries no patch marker and no
 * TemporalChangeVersion upsert for them (three of each per instance before: each upsert a visibility write in
 * Temporal). Runs recorded before carry no level and ask as they did. A patch added later gets the next level,
 * never one that exists: a run started at level 1 must replay the same under whatever code replays it.
 */
export const PATCH_LEVEL = 4;
const PATCH_LEVELS: Readonly<Record<string, number>> = {
  [LIFELONG_PATCH]: 1,
  [STORY_PATCH]: 1,
  [LOCAL_STEPS_PATCH]: 1,
  [CALL_WAKE_PATCH]: 2,
  [INLINE_CALLS_PATCH]: 3,
  [PLAN_IDS_PATCH]: 4,
};
/** `patched(id)`, answered by the run's level where the level covers the patch. */
const takes = (input: InstanceExecutionInput, id: string): boolean =>
  (input.patchLevel ?? 0) >= (PATCH_LEVELS[id] ?? Number.POSITIVE_INFINITY) || patched(id);
/** Words from the relay one run takes before it continues as new: its history stays bounded. */
const TIDINGS_PER_RUN = 500;
/** Activities named in a run's result and details: the most recent ones. */
const EXECUTED_KEPT = 20;

/** Signals as the handler left them for the run that reads them. */
interface Inbox {
  latest?: InstanceTidings;
  /** A signal arrived since the per-dispatch run last looked (its "look for work once more"). */
  signalled: boolean;
  /** The calls worker said a place freed since the call last asked (`callPlaceFreed`). */
  placeFreed?: boolean;
}

/**
 * The Temporal side of one workflow instance, `workflow-instance-{id}`: one workflow for the instance's
 * whole life. Postgres holds the state and most steps run where the change is made (src/engine/pure-steps.ts);
 * this workflow is told every change that matters to it by the outbox relay and
 * - keeps its search attribute `WorkflowInstanceStatus` ("Running/Suspended", …) the instance's status, so
 *   that the Temporal UI's lists, filters and counts are the API's;
 * - runs the steps that need the world (an outbound call on the calls task queue; a step whose resilience
 *   strategy retries it with backoff), one activity per step, as the previous release ran every step;
 * - is Running while the instance is Running (suspended: waiting for the next word), completes when the
 *   instance finishes, and ends Canceled through Temporal's cancellation when the instance is cancelled;
 * - continues as new every TIDINGS_PER_RUN words, the continued run carrying no status (its successor does),
 *   so that counting by `WorkflowInstanceStatus` counts each instance once.
 */
export async function instanceExecution(input: InstanceExecutionInput): Promise<InstanceExecutionResult | void> {
  const inbox: Inbox = { signalled: false };
  setHandler(workAvailable, (tidings) => {
    inbox.signalled = true;
    if (tidings && (!inbox.latest || tidings.revision > inbox.latest.revision)) inbox.latest = tidings;
  });
  setHandler(callPlaceFreed, () => {
    inbox.placeFreed = true;
  });
  // Given at the start (histories recorded before have no `told`): read as the first signal would be.
  const { told } = input;
  if (told && (!inbox.latest || told.revision > inbox.latest.revision)) inbox.latest = told;
  if (takes(input, LIFELONG_PATCH)) return lifelong(input, inbox);
  const result = await perDispatchRun(input, inbox);
  // A run of the previous release that was open at the upgrade hands over to the lifelong shape; a history
  // recorded before ends as it was recorded.
  if (patched(HANDOVER_PATCH)) {
    await continueAsNew<typeof instanceExecution>({
      instanceId: input.instanceId,
      ...(input.searchAttributes !== undefined ? { searchAttributes: input.searchAttributes } : {}),
    });
  }
  return result;
}

async function lifelong(input: InstanceExecutionInput, inbox: Inbox): Promise<InstanceExecutionResult> {
  let known = input.known;
  let shown: InstanceTidings | undefined = known;
  const executed: string[] = [];
  // This run's steps since the word it last took (told with the story): that word's story does not hold them.
  let since = noSteps();
  // Told with a story, and recorded so (patch): the details and the result tell it.
  const telling = (t: InstanceTidings | undefined): t is InstanceTidings & { story: InstanceStory } =>
    t?.story !== undefined && takes(input, STORY_PATCH);
  const startedAs = workflowInfo().typedSearchAttributes.get(INSTANCE_STATUS_ATTRIBUTE);
  let shownStatus: string | undefined = startedAs ?? (known ? `${known.status}/${known.subStatus}` : undefined);
  let planIds = workflowInfo().typedSearchAttributes.get(PLAN_IDS_ATTRIBUTE) ?? [];
  const show = (t: InstanceTidings) => {
    const status = `${t.status}/${t.subStatus}`;
    if (input.searchAttributes && status !== shownStatus)
      upsertSearchAttributes([{ key: INSTANCE_STATUS_ATTRIBUTE, value: status }]);
    const planId = t.story?.planId;
    if (input.searchAttributes && planId && !planIds.includes(planId) && takes(input, PLAN_IDS_PATCH)) {
      planIds = [...planIds, planId].slice(-PLAN_IDS_KEPT);
      upsertSearchAttributes([{ key: PLAN_IDS_ATTRIBUTE, value: planIds }]);
    }
    if (shown && t.version !== shown.version) upsertMemo({ version: t.version });
    shownStatus = status;
    shown = t;
    setCurrentDetails(`**${status}** · ${telling(t) ? storyLine(t, since) : standingIn(t, executed)}`);
  };
  // A step's result says where it left the instance; the next word from the relay says it again.
  const showStep = (s: Standing | undefined) => {
    if (!s || !known) return;
    const now = { ...known, status: s.status, subStatus: s.subStatus, version: s.version, waitingOn: s.waitingOn };
    if (!telling(known)) return show(now);
    // Bounded as the relay bounds its word: the first few bookmarks named, all counted.
    const waitingOn = s.waitingOn.slice(0, STORY_LIMITS.waitingOn).map((w) => clip(w, 2 * STORY_LIMITS.name));
    show({ ...now, waitingOn, story: { ...known.story, bookmarks: s.waitingOn.length } });
  };
  const result = (): InstanceExecutionResult =>
    telling(shown)
      ? storyResult(shown, since)
      : {
          instance: shownStatus ?? 'unknown',
          summary: standingIn(shown, executed),
          executedActivityIds: [...executed],
        };
  let heard = 0;
  try {
    for (;;) {
      await condition(() => inbox.latest !== undefined && (!known || inbox.latest.revision > known.revision));
      const tidings = inbox.latest!;
      known = tidings;
      since = noSteps();
      heard++;
      show(tidings);
      if (tidings.status === 'Finished') {
        // A cancelled instance's workflow ends Canceled: the relay requests the cancellation after this word.
        if (tidings.subStatus === 'Cancelled') await condition(() => false);
        return result();
      }
      if (tidings.hasWork) {
        // Histories recorded before ran each step as an activity of its own, and waited for the relay's word.
        const local = takes(input, LOCAL_STEPS_PATCH);
        // Runs from patch level 1 on read no policy before their first step: the step runs a head no strategy
        // names, and answers the policy of one a strategy names (`plainOnly`). Runs before read it first.
        const peeks = (input.patchLevel ?? 0) < 1;
        let policy = peeks ? (await (local ? localSteps : steps).peekStep(input.instanceId)).nextRetry : undefined;
        let last: Standing | undefined;
        for (;;) {
          const step = await runStep(
            input.instanceId,
            policy,
            showStep,
            local,
            !peeks,
            () => (takes(input, CALL_WAKE_PATCH) ? inbox : undefined),
            () => takes(input, INLINE_CALLS_PATCH),
          );
          policy = step.nextRetry;
          for (const id of ranIn(step)) {
            executed.push(id);
            if (executed.length > EXECUTED_KEPT) executed.shift();
            stepRan(since, id);
          }
          // A long run of pure steps names its last few activities and counts the others.
          since.count += (step.alsoExecuted?.count ?? 0) - (step.alsoExecuted?.last.length ?? 0);
          // An earlier attempt of this step ended the instance, its answer lost: the step tells it as the relay
          // would have, what ran included (no word follows an own step's end).
          if (step.told && (!known || step.told.revision > known.revision)) {
            known = step.told as InstanceTidings;
            since = noSteps();
            show(known);
          } else showStep(step.instance);
          last = step.instance;
          if (!step.hasMoreWork) break;
        }
        // Its own step finished the instance: the workflow completes now, as the relay's word (which follows,
        // and finds it closed) would have made it. A cancellation still comes through the relay, as Canceled.
        if (local && last?.status === 'Finished' && last.subStatus === 'Finished') return result();
      }
      if (heard >= TIDINGS_PER_RUN || workflowInfo().continueAsNewSuggested) {
        // The closed run carries no status, so that a count by status finds each instance once: in its last run.
        const carried = workflowInfo().typedSearchAttributes.getAll();
        if (input.searchAttributes) upsertSearchAttributes([{ key: INSTANCE_STATUS_ATTRIBUTE, value: null }]);
        const { told: _first, ...carriedInput } = input;
        // What it knows goes on, with the steps it ran since its last word.
        const last = shown ?? tidings;
        await makeContinueAsNewFunc<typeof instanceExecution>({ typedSearchAttributes: carried })({
          ...carriedInput,
          known: telling(last) ? { ...last, story: withSteps(last.story, since) } : last,
        });
      }
    }
  } catch (err) {
    // Cancelled through Temporal: shown as the instance stands (the relay told it first), then ended Canceled.
    if (isCancellation(err) && inbox.latest) show(inbox.latest);
    throw err;
  }
}

/** One step through the step activity; an outbound call it starts is made on the calls task queue. */
async function runStep(
  instanceId: string,
  policy: StepRetryPolicy | undefined,
  calling: (standing: Standing | undefined) => void,
  local = false,
  plainOnly = false,
  /**
   * Where the calls worker's wake arrives (`callPlaceFreed`), asked only when a call is made (patch
   * CALL_WAKE_PATCH): the lifelong shape's; the per-dispatch one, and runs recorded before, wait on timers.
   */
  callWake?: () => Inbox | undefined,
  /**
   * Whether this run makes a call marked `inline` inside its task (patch INLINE_CALLS_PATCH), asked only of such a
   * call, with local steps: the lifelong shape's; the per-dispatch one makes every call on the calls task queue.
   */
  inlineCalls?: () => boolean,
): Promise<StepResult> {
  const plain = local ? localSteps : steps;
  // Local steps are this workflow's own: it shows their results itself, and the relay does not tell it again.
  const own = local ? { ownWorkflow: true } : {};
  let step: StepResult;
  // Outbound calls are left to this workflow (`callsApart`), to be made on the calls task queue. A run
  // started before that replays as it ran: its recorded step results carry no call.
  if (policy) {
    try {
      step = await stepsWith(policy, local).executeInstanceStep(instanceId, { callsApart: true, ...own });
    } catch (err) {
      // Until 2026-11-28 a local step's failure, which comes without an ActivityFailure around it, failed the
      // workflow here (test/integration/instance-workflow-fakes.test.ts).
      if (!activityGaveUp(err, local)) throw err;
      // The strategy's attempts ran out on something other than the activity's own fault (its last
      // attempt records that as an incident): run the step once more as final, with the default policy.
      step = await plain.executeInstanceStep(instanceId, { finalAttempt: true, callsApart: true, ...own });
    }
  } else {
    step = await plain.executeInstanceStep(instanceId, {
      callsApart: true,
      ...own,
      ...(plainOnly ? { plainOnly } : {}),
    });
  }
  if (step.call) {
    calling(step.instance);
    const inline = local && step.call.inline === true && inlineCalls?.() === true;
    step = await makeCall(instanceId, step.call, local, callWake?.(), inline);
  }
  return step;
}

/**
 * The previous release's shape, kept for its runs in flight at an upgrade: runs an instance's scheduled
 * activities one step at a time until nothing is runnable, then completes (a dispatch started a new run).
 * A `workAvailable` signal that arrives while running makes it look for work once more.
 */
async function perDispatchRun(input: InstanceExecutionInput, inbox: Inbox): Promise<InstanceExecutionResult | void> {
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
    inbox.signalled = false;
    const step = await runStep(input.instanceId, policy, show);
    policy = step.nextRetry;
    executed.push(...ranIn(step));
    show(step.instance);
    if (!step.hasMoreWork && !inbox.signalled) return result();
    if (!step.hasMoreWork) policy = (await steps.peekStep(input.instanceId)).nextRetry;
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof instanceExecution>(input);
    }
  }
}
