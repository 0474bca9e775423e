import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote, chain, event, writeLine } from '../support/workflows.js';

/**
 * Requests to Temporal (telling an instance's workflow what committed: a start, a signal, a cancellation)
 * go out through the worker's outbox relay, tenants in turn and at most TENANT_TEMPORAL_REQUESTS (16) of
 * one tenant in flight: tenant A cancelling 1,600 instances at once (3,200 requests to Temporal) does not
 * queue tenant B's new instance behind them. B's workflow is told while most of A's backlog still waits.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h?.close());

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe("one tenant's flood of changes for Temporal", () => {
  it("holds its share of the relay: another tenant's instance is told before the flood drains", async () => {
    const keyA = await h.keyWith(['*'], 'flooding');
    const keyB = await h.keyWith(['*'], 'starting');
    const def = await h.request('POST', '/workflow-definitions', { key: keyA, body: approvalWithNote('flood-def') });
    const ids = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1600, tenantId: 'flooding' });
    const waiting = chain('b-def', [writeLine('s', 'started'), event('w', 'go')]);
    expect((await h.request('POST', '/workflow-definitions', { key: keyB, body: waiting })).status).toBe(201);
    const told = async (id: string) =>
      (await h.client.workflow
        .getHandle(instanceWorkflowId(id))
        .describe()
        .then((d) => d.searchAttributes.WorkflowInstanceStatus?.[0])
        .catch(() => undefined)) === 'Running/Suspended'
        ? true
        : undefined;
    const startB = async () => {
      const t = performance.now();
      const r = await h.request('POST', '/workflow-instances', { key: keyB, body: { definitionId: 'b-def' } });
      expect(r.status).toBe(202);
      await eventually(() => told(r.body.workflowInstanceId as string), "B's workflow", 60_000);
      const { rows } = await h.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM instance_outbox WHERE tenant_id = 'flooding'",
      );
      return { ms: performance.now() - t, aWaiting: rows[0]!.n };
    };
    const alone = [await startB(), await startB(), await startB()];

    // A cancels its 1,600 instances: each workflow is started (as Finished/Cancelled) and cancelled.
    const flood = await Promise.all(
      Array.from({ length: 8 }, (_, k) =>
        h.request('POST', '/alterations/run', {
          key: keyA,
          body: { alterations: [{ type: 'Cancel' }], workflowInstanceIds: ids.slice(k * 200, k * 200 + 200) },
        }),
      ),
    );
    expect(flood.every((a) => a.status === 200)).toBe(true);
    const flooded = [await startB(), await startB(), await startB()];
    const what = `B alone: ${JSON.stringify(alone)}; under A's flood: ${JSON.stringify(flooded)}`;
    // Each of B's instances was told while A still had hundreds of its 1,600 waiting.
    expect(
      flooded.every((f) => f.aWaiting > 200),
      what,
    ).toBe(true);
    expect(median(flooded.map((f) => f.ms)), what).toBeLessThan(5_000);
    // A's flood is told all the same.
    await eventually(
      async () => {
        const { rows } = await h.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM instance_outbox');
        return rows[0]!.n === 0 ? true : undefined;
      },
      "A's flood, told",
      180_000,
    );
  }, 300_000);
});

describe("a plan's changes for Temporal", () => {
  it('are told ahead of instances still waiting to be told, and no other row is told at full speed meanwhile', async () => {
    const key = await h.keyWith(['*'], 'planning');
    const def = await h.request('POST', '/workflow-definitions', { key, body: approvalWithNote('plan-ahead-def') });
    // 1,500 instances still to be told (rows in the outbox, as a burst of starts leaves them), and 20 a plan cancels.
    const backlog = await seedInstances(h.pool, {
      definitionVersionId: def.body.id,
      count: 1500,
      tenantId: 'planning',
    });
    const targets = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 20, tenantId: 'planning' });
    await h.pool.query(
      `INSERT INTO instance_outbox (instance_id, tenant_id, created) SELECT unnest($1::text[]), 'planning', true`,
      [backlog],
    );
    const planned = await h.request('POST', '/alterations/submit', {
      key,
      body: { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: targets } },
    });
    expect(planned.status).toBe(202);
    const left = async () => {
      const { rows } = await h.pool.query<{ plan: number; others: number }>(
        `SELECT count(*) FILTER (WHERE instance_id = ANY($1::text[]))::int AS plan,
                count(*) FILTER (WHERE instance_id = ANY($2::text[]))::int AS others
           FROM instance_outbox`,
        [targets, backlog],
      );
      return rows[0]!;
    };
    // The plan's 20 cancellations are told (their rows gone) while most of the backlog still waits.
    const atPlanTold = await eventually(
      async () => {
        const plan = await h.request('GET', `/alterations/${planned.body.planId}`, { key });
        if (plan.body.plan.status !== 4) return undefined;
        const l = await left();
        return l.plan === 0 ? l : undefined;
      },
      "the plan's cancellations told",
      60_000,
    );
    expect(atPlanTold.others, JSON.stringify(atPlanTold)).toBeGreaterThan(1000);
    // Their workflows were told, and end Canceled.
    for (const id of targets.slice(0, 3))
      await eventually(
        async () =>
          (await h.client.workflow.getHandle(instanceWorkflowId(id)).describe()).status.name === 'CANCELLED'
            ? true
            : undefined,
        `${id}'s workflow Canceled`,
      );
    // Once no plan runs, the backlog is told at full speed.
    await eventually(async () => ((await left()).others === 0 ? true : undefined), 'the backlog told', 180_000);
  }, 300_000);
});
