import { readFile } from 'node:fs/promises';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';

// Plans started by earlier releases replay on today's workflow code without a determinism error: plans in
// flight at an upgrade finish as they began (the patches in workflows/alteration-plan.ts). The fixtures are
// histories protobuf-encoded from `fetchHistory()` (the SDK's JSON reader trips over the three copies of
// protobufjs its packages install, so they are binary).
const fixture = async (name: string) =>
  proto.temporal.api.history.v1.History.decode(await readFile(new URL(`../fixtures/${name}`, import.meta.url)));

const replay = (history: proto.temporal.api.history.v1.IHistory) =>
  Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history);

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
});
