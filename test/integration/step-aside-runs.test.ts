import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { batchesOfRun, keepStarting, planToCompletion } from '../support/step-aside.js';

/**
 * A plan that continues as new after every batch (ALTERATION_BATCHES_PER_RUN 1, the least it allows) while
 * another tenant keeps starting plans: what its batches learned about stepping aside (src/alterations/step-aside.ts)
 * goes on with it, so it still completes and no range steps aside twice. Without it carried, a run that stepped
 * aside handed the range to a run that stepped aside again, and the plan did nothing for as long as the other
 * tenant kept starting plans (found by a review).
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 100, window: 2, batchesPerRun: 1 } });
});
afterAll(() => h?.close());

describe('a plan that continues as new beside another tenant that keeps starting plans', () => {
  it('completes, each range stepping aside at most once, and every run of it replays', async () => {
    const other = await keepStarting(h, 'runs-other');
    onTestFinished(other.stop);
    const { planId, plan } = await planToCompletion(h, 'runs-plan', 300, 15_000);
    expect(plan.jobCounts).toMatchObject({ total: 300, completed: 300, failed: 0 });

    // Every run, from the last back to the first: how often each range stepped aside (each run replays).
    const asides = new Map<number, number>();
    let runId: string | undefined = (await h.client.workflow.getHandle(`alteration-plan-${planId}`).describe()).runId;
    let runs = 0;
    while (runId) {
      runs++;
      const { batches, previousRunId } = await batchesOfRun(h, planId, runId);
      for (const b of batches.filter((x) => x.steppedAside)) asides.set(b.fromOrd, (asides.get(b.fromOrd) ?? 0) + 1);
      runId = previousRunId;
    }
    expect(runs).toBeGreaterThan(3);
    expect(asides.size).toBeGreaterThan(0);
    expect(
      [...asides].filter(([, n]) => n > 1),
      'ranges that stepped aside more than once',
    ).toEqual([]);
  });
});
