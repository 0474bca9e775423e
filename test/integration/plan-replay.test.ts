import { readFile } from 'node:fs/promises';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';

// A plan started by the release before local generation and completion (the history of a 250-job plan run
// by commit a2d648b, protobuf-encoded from `fetchHistory()`; the SDK's JSON reader trips over the three
// copies of protobufjs its packages install, so the fixture is binary) replays on today's workflow
// code without a determinism error: plans in flight at an upgrade finish as they began (patch
// `plan-local-steps` in workflows/alteration-plan.ts).
describe('the plan workflow', () => {
  it('replays a history recorded before local plan steps', async () => {
    const history = proto.temporal.api.history.v1.History.decode(
      await readFile(new URL('../fixtures/plan-history-before-local-steps.bin', import.meta.url)),
    );
    const kinds = (history.events ?? []).map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name);
    expect(kinds).toContain('generateJobs');
    expect(kinds).toContain('completePlan');
    await expect(
      Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history),
    ).resolves.toBeUndefined();
  });
});
