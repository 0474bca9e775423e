import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PLAN_STATUS } from '../../src/alterations/model.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

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

const decode = (p: { data?: Uint8Array | null } | undefined) => JSON.parse(Buffer.from(p!.data!).toString('utf8'));

describe('a plan that continues as new beside another tenant that keeps starting plans', () => {
  it('completes, each range stepping aside at most once, and every run of it replays', async () => {
    const key = await h.keyWith(['*'], 'runs-plan');
    const def = await h.request('POST', '/workflow-definitions', { key, body: approvalWithNote('runs-plan') });
    await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 300, tenantId: 'runs-plan' });
    const other = randomUUID();
    await h.pool.query(
      `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at, started_at)
       VALUES ($1, 'runs-other', '[]', '{}', 'runs', $2, now(), now())`,
      [other, PLAN_STATUS.Dispatching],
    );
    // The other tenant starts a plan every 100 ms (one row, its start kept fresh, stands for them).
    const fresh = setInterval(
      () => void h.pool.query('UPDATE alteration_plans SET started_at = now() WHERE id = $1', [other]).catch(() => {}),
      100,
    );
    try {
      const r = await h.request('POST', '/alterations/submit', {
        key,
        body: {
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
          filter: { definitionIds: ['runs-plan'] },
        },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      const planId = r.body.planId as string;
      const view = await eventually(
        async () => {
          const v = await h.request('GET', `/alterations/${planId}`, { key });
          return v.body.plan.status === PLAN_STATUS.Completed ? v.body.plan : undefined;
        },
        'the plan to complete',
        15_000,
      );
      expect(view.jobCounts).toMatchObject({ total: 300, completed: 300, failed: 0 });

      // Every run's history, from the last back to the first: how often each range stepped aside; each replays.
      const asides = new Map<number, number>();
      let runId: string | undefined = (await h.client.workflow.getHandle(`alteration-plan-${planId}`).describe()).runId;
      let runs = 0;
      while (runId) {
        runs++;
        const history = await h.client.workflow.getHandle(`alteration-plan-${planId}`, runId).fetchHistory();
        await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history);
        const scheduled = new Map<string, number>();
        let previous: string | undefined;
        for (const e of history.events ?? []) {
          const started = e.workflowExecutionStartedEventAttributes;
          if (started?.continuedExecutionRunId) previous = started.continuedExecutionRunId;
          const a = e.activityTaskScheduledEventAttributes;
          if (a?.activityType?.name === 'runJobBatch')
            scheduled.set(String(e.eventId), decode(a.input!.payloads![0]!).fromOrd as number);
          const c = e.activityTaskCompletedEventAttributes;
          if (c && scheduled.has(String(c.scheduledEventId)) && decode(c.result!.payloads![0]!).steppedAside) {
            const from = scheduled.get(String(c.scheduledEventId))!;
            asides.set(from, (asides.get(from) ?? 0) + 1);
          }
        }
        runId = previous;
      }
      expect(runs).toBeGreaterThan(3);
      expect(asides.size).toBeGreaterThan(0);
      expect(
        [...asides].filter(([, n]) => n > 1),
        'ranges that stepped aside more than once',
      ).toEqual([]);
    } finally {
      clearInterval(fresh);
      await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = $1', [other, PLAN_STATUS.Cancelled]);
    }
  });
});
