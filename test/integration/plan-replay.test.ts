import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { WORKFLOW_INTERCEPTORS_PATH, WORKFLOWS_PATH } from '../../src/temporal/bundle.js';
import type { RecordedCommand } from '../support/command-recorder.js';
import { localActivities, payloadJson } from '../support/plans.js';

// Plans started by earlier releases replay on today's workflow code without a determinism error: plans in
// flight at an upgrade finish as they began (the patches in workflows/alteration-plan.ts). The fixtures are
// histories protobuf-encoded from `fetchHistory()` (the SDK's JSON reader trips over the three copies of
// protobufjs its packages install, so they are binary).
const fixture = async (name: string) =>
  proto.temporal.api.history.v1.History.decode(await readFile(new URL(`../fixtures/${name}`, import.meta.url)));

const replay = (history: proto.temporal.api.history.v1.IHistory) =>
  Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history);

// The workflows bundled again with test/support/command-recorder.ts beside the service's interceptors.
let recordingBundle: string;
beforeAll(async () => {
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [
      WORKFLOW_INTERCEPTORS_PATH,
      fileURLToPath(new URL('../support/command-recorder.ts', import.meta.url)),
    ],
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} },
  });
  recordingBundle = code;
}, 120_000);

/** Replays a history and answers the commands today's code asked for on the way, with what they carry. */
/**
 * A recorded instance run: finished with a result naming what ran (`ran`, at definition version `version`), or
 * still open (`ran` undefined); and it replays on today's workflow code.
 */
async function finishesAsRecordedAndReplays(
  history: proto.temporal.api.history.v1.IHistory,
  ran: string[] | undefined,
  version: number,
): Promise<void> {
  const completed = (history.events ?? []).find((e) => e.workflowExecutionCompletedEventAttributes);
  if (ran) {
    const result = payloadJson(completed?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0]);
    expect(result).toMatchObject({ instance: 'Finished/Finished', executedActivityIds: ran, version });
  } else {
    expect(completed).toBeUndefined();
  }
  await expect(replay(history)).resolves.toBeUndefined();
}

async function replayRecorded(history: proto.temporal.api.history.v1.IHistory): Promise<RecordedCommand[]> {
  const commands: RecordedCommand[] = [];
  await Worker.runReplayHistory(
    {
      workflowBundle: { code: recordingBundle },
      sinks: {
        commands: { record: { fn: (_info, c: RecordedCommand) => void commands.push(c), callDuringReplay: true } },
      },
    },
    history,
  );
  return commands;
}

/** The same commands as the history recorded them (local activities by type: their markers keep no input). */
function recordedIn(history: proto.temporal.api.history.v1.IHistory): RecordedCommand[] {
  const out: RecordedCommand[] = [];
  for (const e of history.events ?? []) {
    const a = e.activityTaskScheduledEventAttributes;
    if (a) {
      const summary = payloadJson(e.userMetadata?.summary);
      const weight = a.priority?.fairnessWeight;
      out.push({
        kind: 'activity',
        type: a.activityType!.name!,
        args: (a.input?.payloads ?? []).map((p) => payloadJson(p)),
        ...(summary === undefined ? {} : { summary }),
        ...(weight ? { fairnessWeight: weight } : {}),
      });
    }
    const t = e.timerStartedEventAttributes?.startToFireTimeout;
    if (t) out.push({ kind: 'timer', ms: Number(t.seconds ?? 0) * 1000 + Math.round((t.nanos ?? 0) / 1e6) });
    const m = e.markerRecordedEventAttributes;
    if (m?.markerName === 'core_local_activity')
      out.push({ kind: 'localActivity', type: payloadJson(m.details?.data?.payloads?.[0])?.activity_type, args: [] });
    const n = e.workflowExecutionContinuedAsNewEventAttributes;
    if (n) out.push({ kind: 'continueAsNew', args: (n.input?.payloads ?? []).map((p) => payloadJson(p)) });
  }
  return out;
}
const withoutLocalArgs = (commands: RecordedCommand[]) =>
  commands.map((c) => (c.kind === 'localActivity' ? { ...c, args: [] } : c));

describe('the plan workflow', () => {
  // A 250-job plan run by commit a2d648b, before `plan-local-steps`.
  it('replays a history recorded before local plan steps', async () => {
    const history = await fixture('plan-history-before-local-steps.bin');
    const kinds = (history.events ?? []).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name);
    expect(kinds).toContain('generateJobs');
    expect(kinds).toContain('completePlan');
    await expect(replay(history)).resolves.toBeUndefined();
  });

  // A 2,000-job plan (batch size 1,000, window 2) run by commit 1ac6f77, before `plan-even-batches`: eight
  // batches of 250 (four rounds of the window), where today's sizing would run four of 500.
  it('replays a history recorded before even batches', async () => {
    const history = await fixture('plan-history-local-steps.bin');
    const batches = (history.events ?? []).filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJobBatch',
    );
    expect(batches).toHaveLength(8);
    await expect(replay(history)).resolves.toBeUndefined();
  });

  // Recorded by commit d49ef9f, before the batch count was counted (issue 23): a plan of 60 jobs at 20 a
  // second (batches of 5) with a canary of 12 (5 + 5 + 2, then the pause, a resume and 10 more batches), 8
  // batches per run, so it continued as new with its throttle and canary carried; and a plan at 20 a
  // second cancelled after 20 jobs, two of its batches in flight reading Cancelled. That code answered
  // "batch 13 of 2" and "batch 6 of 4"; today's counts the batches it runs, which is no command: both replay.
  it.each([
    ['plan-history-rate-canary-run1.bin', 8],
    ['plan-history-rate-canary-run2.bin', 5],
    ['plan-history-rate-cancelled.bin', 6],
  ])('replays %s, a throttled plan recorded before honest progress', async (name, batches) => {
    const history = await fixture(name);
    const scheduled = (history.events ?? []).filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJobBatch',
    );
    expect(scheduled).toHaveLength(batches);
    await expect(replay(history)).resolves.toBeUndefined();
  });
  // Recorded by commit 70d7ad9, the last with the batch scheduling written inline in `alterationPlan` (since
  // then the plain class PlanScheduler in workflows/plan-scheduler.ts, which must give the same commands):
  // every patch taken; batches of 50, window 2, 4 batches per run (window 8 for the slow rate). A plain plan
  // across continue-as-new; a throttled canary paused, resumed and continued as new three times; a plan
  // paused for failures (400 of 600 instances finished) then cancelled; a throttled plan paused by hand,
  // its rate raised and resumed; a revert; 12 jobs at 2 a second whose batches due more than 2 s ahead
  // wait on durable timers.
  it.each([
    ['plain', 2, 8],
    ['rate-canary', 4, 13],
    ['failures', 1, 4],
    ['paused-resumed', 2, 5],
    ['revert', 2, 8],
    ['slow-rate', 1, 12],
  ])('replays the %s plan recorded before the scheduling class (%i runs, %i batches)', async (name, runs, batches) => {
    let scheduled = 0;
    for (let run = 1; run <= runs; run++) {
      const history = await fixture(`plan-history-scheduler-${name}-run${run}.bin`);
      scheduled += (history.events ?? []).filter(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJobBatch',
      ).length;
      // The same commands carrying the same values: each batch's range, notBefore, summary and weight, each
      // timer's duration, the progress carried to the next run.
      expect(withoutLocalArgs(await replayRecorded(history))).toEqual(recordedIn(history));
    }
    expect(scheduled).toBe(batches);
  });
});

describe('a plan whose batch stepped aside', () => {
  // Recorded by commit 4dc1b65 (the scenario of test/integration/step-aside-runs.test.ts, with 8 batches a run): a
  // plan of 1,000 jobs in batches of 100, window 2, while another tenant kept starting plans. Its first run asked
  // patched('plan-step-aside'); the batch of range 0 stepped aside (it came back with nothing done) and ran again
  // after 100 and 400; the run continued as new with what it had learned carried, and the second run ended it. A
  // change to the scheduler or to what the step-aside carries must give the same commands with the same values.
  it('replays both runs with the same commands, the stepped-aside range run again once', async () => {
    const runs = [await fixture('plan-history-step-aside-run1.bin'), await fixture('plan-history-step-aside-run2.bin')];
    const patches = (runs[0]!.events ?? [])
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
      .map((e) => payloadJson(e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0])?.id);
    expect(patches).toContain('plan-step-aside');
    const ranges: { fromOrd: number; steppedAside: boolean }[] = [];
    for (const history of runs) {
      const scheduled = new Map<string, number>();
      for (const e of history.events ?? []) {
        const a = e.activityTaskScheduledEventAttributes;
        if (a?.activityType?.name === 'runJobBatch')
          scheduled.set(String(e.eventId), payloadJson(a.input?.payloads?.[0]).fromOrd as number);
        const c = e.activityTaskCompletedEventAttributes;
        const fromOrd = c ? scheduled.get(String(c.scheduledEventId)) : undefined;
        if (fromOrd !== undefined)
          ranges.push({ fromOrd, steppedAside: payloadJson(c?.result?.payloads?.[0]).steppedAside === true });
      }
      expect(withoutLocalArgs(await replayRecorded(history))).toEqual(recordedIn(history));
    }
    expect(ranges.filter((r) => r.steppedAside).map((r) => r.fromOrd)).toEqual([0]);
    const ran = ranges.filter((r) => !r.steppedAside).map((r) => r.fromOrd);
    expect([...ran].sort((x, y) => x - y)).toEqual(Array.from({ length: 10 }, (_, i) => i * 100));
  });
});

describe('plans open at the upgrade to approvals and maintenance windows', () => {
  // Recorded by test/support/record-plan-histories.ts at b0fe906 (the release before plan governance), each
  // still open when fetched: 20,000 jobs at 2,000 a second caught with batches in flight; a canary of 10
  // paused, waiting to be resumed; 5 a second waiting on the throttle's timer. Today's code must take the
  // path they took and go on from where they are.
  it.each([
    ['plan-history-before-governance-running.bin', 'running'],
    ['plan-history-before-governance-paused.bin', 'paused'],
    ['plan-history-before-governance-throttled.bin', 'throttled'],
  ])('replays %s (a %s plan)', async (name) => {
    const history = await fixture(name);
    const last = history.events?.at(-1);
    expect(
      last?.workflowExecutionCompletedEventAttributes ?? last?.workflowExecutionContinuedAsNewEventAttributes,
    ).toBeFalsy();
    await expect(replay(history)).resolves.toBeUndefined();
  });
});

describe('plans open at the upgrade to the approved set (jobs made before the approval, the policy held at generation)', () => {
  // Recorded by test/support/record-governed-plan-histories.ts at 5beb1f4 (the release before the plan-approved-set
  // patch), each still open when fetched: a plan waiting for its approval (no jobs yet), one paused by its schedule
  // (not before an hour later), one running at 2 a second. Today's code must take the path they took: the waiting
  // plan makes its jobs after the approval, as it began to, and none is held when its jobs are made.
  it.each([
    ['plan-history-before-approved-set-awaiting-approval.bin', 'awaiting approval'],
    ['plan-history-before-approved-set-paused-by-schedule.bin', 'paused by schedule'],
    ['plan-history-before-approved-set-running.bin', 'running'],
  ])('replays %s (a plan %s)', async (name) => {
    const history = await fixture(name);
    const last = history.events?.at(-1);
    expect(
      last?.workflowExecutionCompletedEventAttributes ?? last?.workflowExecutionContinuedAsNewEventAttributes,
    ).toBeFalsy();
    await expect(replay(history)).resolves.toBeUndefined();
    // None of them asked for its jobs with the hold of the new path.
    const commands = await replayRecorded(history);
    expect(JSON.stringify(commands)).not.toContain('"hold"');
  });
});

describe('the instance workflow', () => {
  // An instance WriteLine → SendHttpRequest (retry-3-quick; the first call answered 503) → WriteLine, run
  // by commit 0a9d413, before calls ran apart: the call was made inside executeInstanceStep, retried by
  // Temporal. Today's code makes a call on the calls task queue when a step's result asks for one; the
  // recorded results of this run ask for none, so it replays as it ran (no patch needed).
  it('replays a history recorded before calls ran on their own task queue', async () => {
    const history = await fixture('instance-history-call-inline.bin');
    const kinds = (history.events ?? []).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name);
    expect(kinds).toContain('executeInstanceStep');
    expect(kinds).not.toContain('callOutbound');
    await expect(replay(history)).resolves.toBeUndefined();
  });

  // Recorded by commit 6cc2c07, the last release of one run per dispatch (a run ended when its instance
  // suspended; a trigger started the next): WriteLine → Event, suspended; then, after the trigger, the
  // SetVariable and the end; and a run left open in the middle of an outbound call. Today's workflow is one
  // run for the instance's whole life (patch `instance-lifelong-v1`): runs recorded without the patch take
  // the old path and replay as they ran; an open one hands over to the lifelong shape when it ends.
  // Recorded by commit 9ad94d3, the lifelong shape before `instance-local-steps`: each step an activity of
  // its own, the workflow waiting for the relay's word after its last step. An instance WriteLine →
  // SendHttpRequest → WriteLine run to its end, and one left open with its call in flight: both replay, and
  // the open one would go on the old way (its history has no marker of the patch).
  it.each([
    ['instance-history-lifelong-call.bin', true],
    ['instance-history-lifelong-open-call.bin', false],
  ])('replays %s, a lifelong run recorded before its steps ran as local activities', async (name, ended) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const kinds = events.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name);
    expect(kinds).toContain('executeInstanceStep');
    expect(kinds).toContain('callOutbound');
    expect(events.some((e) => e.workflowExecutionCompletedEventAttributes)).toBe(ended);
    await expect(replay(history)).resolves.toBeUndefined();
  });

  // Recorded by commit 70d7ad9 (test/integration/record-instance-histories.test.ts), the lifelong shape with its
  // steps as local activities, before its details and result told the instance's story from Postgres
  // (patch `instance-story`): a suspended instance migrated to version 2 (its memo upserted) then triggered to
  // its end; one cancelled by a plan (ended Canceled); one faulted by its step inside Postgres (left open); one
  // whose workflow made its outbound call, ran the step after it, waited, and was triggered to its end.
  it.each([
    ['instance-history-local-migrated-finished.bin', 'COMPLETED'],
    ['instance-history-local-cancelled.bin', 'CANCELED'],
    ['instance-history-local-faulted.bin', undefined],
    ['instance-history-local-call-suspended-finished.bin', 'COMPLETED'],
  ])('replays %s, a lifelong run with local steps recorded before its story', async (name, ended) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const markers = events.map((e) => e.markerRecordedEventAttributes?.markerName).filter(Boolean);
    expect(markers).toContain('core_patch');
    const closed = events.find(
      (e) => e.workflowExecutionCompletedEventAttributes || e.workflowExecutionCanceledEventAttributes,
    );
    expect(
      closed &&
        (closed.workflowExecutionCompletedEventAttributes
          ? 'COMPLETED'
          : closed.workflowExecutionCanceledEventAttributes
            ? 'CANCELED'
            : ''),
    ).toBe(ended);
    if (name.includes('call')) expect(markers).toContain('core_local_activity');
    if (name.includes('migrated')) expect(events.some((e) => e.workflowPropertiesModifiedEventAttributes)).toBe(true);
    await expect(replay(history)).resolves.toBeUndefined();
  });

  // Recorded by commit 9ec2909's workflow code, the same four lives with the story (patch `instance-story`): the
  // words carry what Postgres holds, and the details and the result tell it. Each has the patch's marker; the
  // finished ones' results name what ran wherever it ran (inside Postgres with the start and the triggers, or in
  // the workflow). Replayed on code that does not ask patched('instance-story'), they fail as nondeterministic.
  it.each([
    ['instance-history-story-migrated-finished.bin', ['start', 'wait', 'done'], 2],
    ['instance-history-story-cancelled.bin', undefined, 1],
    ['instance-history-story-faulted.bin', undefined, 1],
    ['instance-history-story-call-suspended-finished.bin', ['start', 'call', 'wait', 'set'], 1],
  ])('replays %s, a lifelong run that tells its story', async (name, ran, version) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const patches = events
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
      .map((e) => payloadJson(e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0])?.id);
    expect(patches).toContain('instance-story');
    await finishesAsRecordedAndReplays(history, ran, version);
  });

  // Recorded by the workflow code of patch level 1 (workflows/instance-execution.ts, PATCH_LEVEL): the relay starts
  // each run with `patchLevel: 1`, so the run asks patched() nothing (no marker, no TemporalChangeVersion upsert),
  // runs its first step with `plainOnly` instead of a peekStep first, and its own steps queue no word to it. Code
  // that asked patched() or peeked again for these runs would fail them as nondeterministic.
  it.each([
    ['instance-history-level1-migrated-finished.bin', ['start', 'wait', 'done'], 2],
    ['instance-history-level1-cancelled.bin', undefined, 1],
    ['instance-history-level1-faulted.bin', undefined, 1],
    ['instance-history-level1-call-suspended-finished.bin', ['start', 'call', 'wait', 'set'], 1],
  ])('replays %s, a run started at patch level 1', async (name, ran, version) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const input = payloadJson(events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]);
    expect(input).toMatchObject({ patchLevel: 1 });
    const markers = events.map((e) => e.markerRecordedEventAttributes?.markerName).filter(Boolean);
    expect(markers).not.toContain('core_patch');
    expect(localActivities(events)).not.toContain('peekStep');
    await finishesAsRecordedAndReplays(history, ran, version);
  });

  // Recorded by the workflow code of patch level 2 (PATCH_LEVEL 2, patch `instance-call-wake`), on 2026-11-28: the
  // four lives of level 1 again, and a call turned back over its tenant's share (five of the tenant's calls hung)
  // whose workflow the calls worker woke (`callPlaceFreed`) when one of them ended: its timer cancelled, the call
  // asked again and made, the instance finished. Code that waited on the timer alone for these runs, or asked
  // patched() for the wake, would fail them as nondeterministic.
  it.each([
    ['instance-history-level2-migrated-finished.bin', ['start', 'wait', 'done'], 2],
    ['instance-history-level2-cancelled.bin', undefined, 1],
    ['instance-history-level2-faulted.bin', undefined, 1],
    ['instance-history-level2-call-suspended-finished.bin', ['start', 'call', 'wait', 'set'], 1],
    ['instance-history-level2-call-woken-finished.bin', ['start', 'call'], 1],
  ])('replays %s, a run started at patch level 2', async (name, ran, version) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const input = payloadJson(events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]);
    expect(input).toMatchObject({ patchLevel: 2 });
    const markers = events.map((e) => e.markerRecordedEventAttributes?.markerName).filter(Boolean);
    expect(markers).not.toContain('core_patch');
    const calls = events
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callOutbound')
      .map((e) => payloadJson(e.activityTaskScheduledEventAttributes?.input?.payloads?.[0]));
    for (const call of calls) expect(call).toMatchObject({ turnBack: 'wake' });
    if (name.includes('woken')) {
      // Turned back once, woken (the signal, then the timer cancelled), asked again.
      expect(calls).toHaveLength(2);
      const signalled = events.findIndex(
        (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'callPlaceFreed',
      );
      const cancelled = events.findIndex((e) => e.timerCanceledEventAttributes);
      expect(events.findIndex((e) => e.timerStartedEventAttributes)).toBeLessThan(signalled);
      expect(signalled).toBeLessThan(cancelled);
      expect(events.some((e) => e.timerFiredEventAttributes)).toBe(false);
    }
    await finishesAsRecordedAndReplays(history, ran, version);
  });

  // Recorded by the workflow code of patch level 3 (PATCH_LEVEL 3, patch `instance-inline-calls`), on 2026-11-28:
  // the lives of level 2 again, with the calls through a connection that answers within WORKER_INLINE_CALL_MAX_MS
  // made inside the workflow task as local activities (the woken one turned back inside its task, then made there
  // after the wake), and one call through a connection with a longer timeout made on the calls task queue. Code
  // that made an inline call on the calls task queue for these runs, or asked patched() for it, would fail them as
  // nondeterministic.
  it.each([
    ['instance-history-level3-migrated-finished.bin', ['start', 'wait', 'done'], 2],
    ['instance-history-level3-cancelled.bin', undefined, 1],
    ['instance-history-level3-faulted.bin', undefined, 1],
    ['instance-history-level3-call-suspended-finished.bin', ['start', 'call', 'wait', 'set'], 1],
    ['instance-history-level3-call-woken-finished.bin', ['start', 'call'], 1],
    ['instance-history-level3-call-queued-finished.bin', ['start', 'call'], 1],
  ])('replays %s, a run started at patch level 3', async (name, ran, version) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const input = payloadJson(events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]);
    expect(input).toMatchObject({ patchLevel: 3 });
    const markers = events.map((e) => e.markerRecordedEventAttributes?.markerName).filter(Boolean);
    expect(markers).not.toContain('core_patch');
    const queued = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callOutbound');
    const inline = localActivities(events).filter((type) => type === 'callOutbound');
    if (name.includes('queued')) {
      expect(queued).toHaveLength(1);
      expect(inline).toEqual([]);
    } else if (name.includes('call')) {
      expect(queued).toEqual([]);
      // Turned back once and woken (the signal, then the timer cancelled), asked again: two local activities.
      expect(inline).toHaveLength(name.includes('woken') ? 2 : 1);
    }
    if (name.includes('woken')) {
      const signalled = events.findIndex(
        (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'callPlaceFreed',
      );
      expect(events.findIndex((e) => e.timerStartedEventAttributes)).toBeLessThan(signalled);
      expect(signalled).toBeLessThan(events.findIndex((e) => e.timerCanceledEventAttributes));
    }
    await finishesAsRecordedAndReplays(history, ran, version);
  });

  // Recorded by the workflow code of patch level 4 (PATCH_LEVEL 4, patch `instance-plan-ids`), on 2026-11-29: the
  // lives of level 3 again, the migrated and the cancelled one told so by a plan's word (`story.planId`), which
  // their workflows added to the search attribute AlterationPlanIds. Code that upserted it otherwise for these runs,
  // or asked patched() for it, would fail them as nondeterministic.
  it.each([
    ['instance-history-level4-migrated-finished.bin', ['start', 'wait', 'done'], 2],
    ['instance-history-level4-cancelled.bin', undefined, 1],
    ['instance-history-level4-faulted.bin', undefined, 1],
    ['instance-history-level4-call-suspended-finished.bin', ['start', 'call', 'wait', 'set'], 1],
    ['instance-history-level4-call-woken-finished.bin', ['start', 'call'], 1],
    ['instance-history-level4-call-queued-finished.bin', ['start', 'call'], 1],
  ])('replays %s, a run started at patch level 4', async (name, ran, version) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const input = payloadJson(events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]);
    expect(input).toMatchObject({ patchLevel: 4 });
    const markers = events.map((e) => e.markerRecordedEventAttributes?.markerName).filter(Boolean);
    expect(markers).not.toContain('core_patch');
    const planIds = events.flatMap((e) => {
      const fields = e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
      return fields?.AlterationPlanIds ? [payloadJson(fields.AlterationPlanIds)] : [];
    });
    if (name.includes('migrated') || name.includes('cancelled')) expect(planIds).toEqual([[expect.any(String)]]);
    else expect(planIds).toEqual([]);
    await finishesAsRecordedAndReplays(history, ran, version);
  });

  it.each([
    ['instance-history-per-dispatch-suspended.bin', ['start', 'wait'], 'Running/Suspended'],
    ['instance-history-per-dispatch-finished.bin', ['set'], 'Finished/Finished'],
    ['instance-history-per-dispatch-open-call.bin', ['start'], undefined],
  ])('replays %s, a per-dispatch run of the previous release', async (name, ran, ended) => {
    const history = await fixture(name);
    const events = history.events ?? [];
    const markers = events.map((e) => e.markerRecordedEventAttributes?.markerName).filter(Boolean);
    expect(markers).toContain('core_patch');
    const completed = events.find((e) => e.workflowExecutionCompletedEventAttributes);
    if (ended) {
      const result = payloadJson(completed?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0]);
      expect(result).toMatchObject({ instance: ended, executedActivityIds: ran });
    } else {
      expect(completed).toBeUndefined();
    }
    await expect(replay(history)).resolves.toBeUndefined();
  });
});
