import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * Plan lists stay small whatever the plans hold (contract section 8, "Plan lists"): a summary is the plan
 * without its filter and with `alterationTypes` and `alterationCount` instead of its alterations, so a page
 * of 100 summaries of plans whose bodies are 1 MiB each is under 1 MB (attack report 2026-11-25, M3: it was
 * 98.7 MB). Real Postgres; the plans reach the worker's Temporal.
 */
let h: Harness;
const run = Math.random().toString(36).slice(2, 8);

beforeAll(async () => {
  // Plan bodies up to the service's default MAX_BODY_BYTES (1 MiB), as in production.
  h = await createHarness({ config: { maxBodyBytes: 1024 * 1024 } });
});
afterAll(() => h?.close());

/** 100 alterations, most of about 11.6 KB (a body just under 1 MiB): every 10th a ScheduleActivity, one Cancel. */
const bigAlterations = () =>
  Array.from({ length: 100 }, (_, i) =>
    i === 57
      ? { type: 'Cancel' }
      : i % 10 === 9
        ? { type: 'ScheduleActivity', activityId: `a-${randomBytes(8).toString('hex')}` }
        : { type: 'ModifyVariable', variableId: 'note', value: randomBytes(5_800).toString('hex') },
  );

describe('a page of plan summaries', () => {
  it('is under 1 MB for 100 plans of 1 MiB each, and names each plan’s alteration types and count', async () => {
    const key = await h.keyWith(['alterations:*'], `summaries-${run}`);
    // One plan through the API (its filter matches nothing), as a client would submit it.
    const body = { id: `big-${run}-0`, alterations: bigAlterations(), filter: { workflowInstanceIds: ['nothing'] } };
    expect(Buffer.byteLength(JSON.stringify(body))).toBeGreaterThan(1_000_000);
    const submitted = await h.request('POST', '/alterations/submit', { key, body });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    // 99 more like it, each with a body of its own, written as the API writes them (faster than 99 requests).
    await h.pool.query(
      `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at, completed_at)
       SELECT $1 || n, tenant_id, $2::jsonb, filter, request_hash || n, 4, created_at + n * interval '1 ms', created_at
         FROM alteration_plans p, generate_series(1, 99) AS n WHERE p.id = $3`,
      [`big-${run}-`, JSON.stringify(bigAlterations()), body.id],
    );

    const res = await h.app.request('/alterations?limit=100', { headers: { authorization: `ApiKey ${key}` } });
    const text = await res.text();
    expect(res.status).toBe(200);
    const bytes = Buffer.byteLength(text);
    expect(bytes).toBeLessThan(1_000_000);
    const page = JSON.parse(text) as { items: Record<string, unknown>[] };
    expect(page.items).toHaveLength(100);
    for (const item of page.items) {
      expect(item).not.toHaveProperty('alterations');
      expect(item).not.toHaveProperty('workflowInstanceFilter');
      // Distinct types in order of first use: ModifyVariable (0), ScheduleActivity (9), Cancel (57).
      expect(item).toMatchObject({
        alterationTypes: ['ModifyVariable', 'ScheduleActivity', 'Cancel'],
        alterationCount: 100,
      });
    }
    // The plan read still has the alterations and the filter.
    const one = await h.request('GET', `/alterations/${body.id}`, { key });
    expect(one.body.plan.alterations).toHaveLength(100);
    expect(one.body.plan.workflowInstanceFilter).toEqual(body.filter);
  });

  it('counts every alteration and lists a type once, in order of first use', async () => {
    const key = await h.keyWith(['alterations:*'], `types-${run}`);
    const alterations = [
      { type: 'ScheduleActivity', activityId: 'b' },
      { type: 'ModifyVariable', variableId: 'amount', value: 1 },
      { type: 'ScheduleActivity', activityId: 'c' },
      { type: 'Cancel' },
      { type: 'ModifyVariable', variableId: 'amount', value: 2 },
    ];
    const submitted = await h.request('POST', '/alterations/submit', {
      key,
      body: { id: `types-${run}`, alterations, filter: { workflowInstanceIds: ['nothing'] } },
    });
    expect(submitted.status).toBe(202);
    const page = await h.request('GET', '/alterations', { key });
    expect(page.body.items).toHaveLength(1);
    expect(page.body.items[0]).toMatchObject({
      id: `types-${run}`,
      alterationTypes: ['ScheduleActivity', 'ModifyVariable', 'Cancel'],
      alterationCount: 5,
    });
  });
});
