import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Plan batches are a per-tenant share of the workers (contract section 8): they run on the batches task queue,
 * a few slots per worker (WORKER_BATCH_SLOTS), where Task Queue Fairness hands out the backlog by tenant and
 * weighs a small plan's batches ahead of a big one's. Tenant A keeps three plans of 20,000 instances running;
 * tenant B's plan of 1,000 is measured, and its batches must overtake A's that were queued before them.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 2000, window: 4, batchesPerRun: 500 } });
});
afterAll(() => h?.close());

type Event = Record<string, any>;
const at = (e: Event) => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;

/** When each batch of a plan was scheduled and started, from the plan's Temporal history. */
async function batches(planId: string): Promise<{ scheduled: number; started: number | undefined }[]> {
  const history = await h.client.workflow.getHandle(`alteration-plan-${planId}`).fetchHistory();
  const events = (history.events ?? []) as Event[];
  const byId = new Map<string, { scheduled: number; started: number | undefined }>();
  for (const e of events) {
    const a = e.activityTaskScheduledEventAttributes;
    if (a?.activityType?.name === 'runJobBatch') byId.set(String(e.eventId), { scheduled: at(e), started: undefined });
    const s = e.activityTaskStartedEventAttributes;
    if (s) {
      const b = byId.get(String(s.scheduledEventId));
      if (b) b.started = at(e);
    }
  }
  return [...byId.values()];
}

describe("one tenant's big plans keeping the batch slots busy", () => {
  it("let another tenant's small plan through first: it completes within 10 s, its batches ahead of theirs", async () => {
    const keyA = await h.keyWith(['*'], 'big-plans');
    const keyB = await h.keyWith(['*'], 'small-plan');
    const plansA: string[] = [];
    for (const d of ['a1', 'a2', 'a3']) {
      const def = await h.request('POST', '/workflow-definitions', { key: keyA, body: approvalWithNote(d) });
      await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 20_000, tenantId: 'big-plans' });
    }
    const defB = await h.request('POST', '/workflow-definitions', { key: keyB, body: approvalWithNote('b1') });
    await seedInstances(h.pool, { definitionVersionId: defB.body.id, count: 1000, tenantId: 'small-plan' });
    await h.pool.query('ANALYZE workflow_instances');

    for (const d of ['a1', 'a2', 'a3']) {
      const r = await h.request('POST', '/alterations/submit', {
        key: keyA,
        body: {
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
          filter: { definitionIds: [d] },
        },
      });
      plansA.push(r.body.planId as string);
    }
    // A's plans are running: their batches fill the slots and back up in the queue.
    await eventually(async () => {
      const views = await Promise.all(plansA.map((p) => h.request('GET', `/alterations/${p}`, { key: keyA })));
      return views.every((v) => v.body.plan.jobCounts.completed > 0) ? true : undefined;
    }, "tenant A's plans to be under way");

    const started = performance.now();
    const b = await h.request('POST', '/alterations/submit', {
      key: keyB,
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 2 }],
        filter: { definitionIds: ['b1'] },
      },
    });
    const planB = b.body.planId as string;
    await eventually(
      async () =>
        (await h.request('GET', `/alterations/${planB}`, { key: keyB })).body.plan.status === 4 ? true : undefined,
      "tenant B's plan to complete",
      30_000,
    );
    const seconds = (performance.now() - started) / 1000;
    const stillRunning = await Promise.all(plansA.map((p) => h.request('GET', `/alterations/${p}`, { key: keyA })));
    expect(seconds, `B took ${seconds.toFixed(1)} s`).toBeLessThan(10);

    // B's batches overtook A's: batches of A queued before B's first was scheduled started after B's last.
    const ofB = await batches(planB);
    const firstB = Math.min(...ofB.map((x) => x.scheduled));
    const lastBStart = Math.max(...ofB.map((x) => x.started!));
    await eventually(
      async () => {
        const views = await Promise.all(plansA.map((p) => h.request('GET', `/alterations/${p}`, { key: keyA })));
        return views.every((v) => v.body.plan.status === 4) ? true : undefined;
      },
      "tenant A's plans to complete",
      120_000,
    );
    const ofA = (await Promise.all(plansA.map(batches))).flat();
    const overtaken = ofA.filter((x) => x.scheduled < firstB && x.started !== undefined && x.started > lastBStart);
    expect(
      overtaken.length,
      `A had ${stillRunning.filter((v) => v.body.plan.status !== 4).length} plans running when B completed`,
    ).toBeGreaterThan(0);
  }, 180_000);
});
