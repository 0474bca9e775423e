import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote, chain, event, writeLine } from '../support/workflows.js';

/**
 * Requests to Temporal (an instance's start or signal, for each instance a request or a plan dispatches) are
 * a per-tenant share of each process (TENANT_TEMPORAL_REQUESTS, 16): tenant A running eight alterations of
 * 200 instances each at once (8 × 16 starts in flight without the share) does not queue tenant B's
 * `POST /workflow-instances` behind them. Measured on this machine: B's median start took 144 ms under the
 * flood with the share, 709 ms without it (40–60 ms alone).
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h?.close());

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe("one tenant's flood of instance dispatches", () => {
  it("holds its share of requests to Temporal: another tenant's starts are not queued behind it", async () => {
    const keyA = await h.keyWith(['*'], 'flooding');
    const keyB = await h.keyWith(['*'], 'starting');
    const def = await h.request('POST', '/workflow-definitions', { key: keyA, body: approvalWithNote('flood-def') });
    const ids = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1600, tenantId: 'flooding' });
    const waiting = chain('b-def', [writeLine('s', 'started'), event('w', 'go')]);
    expect((await h.request('POST', '/workflow-definitions', { key: keyB, body: waiting })).status).toBe(201);
    const startB = async () => {
      const t = performance.now();
      const r = await h.request('POST', '/workflow-instances', { key: keyB, body: { definitionId: 'b-def' } });
      expect(r.status).toBe(202);
      return performance.now() - t;
    };
    const alone: number[] = [];
    for (let i = 0; i < 10; i++) alone.push(await startB());

    // Eight of A's requests at once, each dispatching 200 instances (ScheduleActivity of a WriteLine).
    const flood = Array.from({ length: 8 }, (_, k) =>
      h.request('POST', '/alterations/run', {
        key: keyA,
        body: {
          alterations: [{ type: 'ScheduleActivity', activityId: 'note' }],
          workflowInstanceIds: ids.slice(k * 200, k * 200 + 200),
        },
      }),
    );
    await new Promise((r) => setTimeout(r, 300));
    const flooded: number[] = [];
    for (let i = 0; i < 15; i++) flooded.push(await startB());
    const answers = await Promise.all(flood);
    expect(
      answers.every((a) => a.status === 200 && a.body.results.every((x: { isSuccessful: boolean }) => x.isSuccessful)),
    ).toBe(true);
    expect(
      median(flooded),
      `B alone: ${alone.map(Math.round).join(',')}; flooded: ${flooded.map(Math.round).join(',')}`,
    ).toBeLessThan(median(alone) + 300);
  }, 120_000);
});
