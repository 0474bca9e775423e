import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileFilter, selectInstanceIds } from '../../src/alterations/filter.js';
import type { Filter } from '../../src/alterations/model.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { orderApproval } from '../support/workflows.js';

/** CONTRACT section 8: activity filters compile to one set-based condition, cheap at the limit. */
let h: Harness;
let ids: string[];
const COUNT = 10_000;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  const def = await h.request('POST', '/workflow-definitions', { body: orderApproval('scale-def') });
  expect(def.status).toBe(201);
  ids = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: COUNT });
  // A few records each: start, wait, one of 50 steps ("Step {k mod 7}"), one of 20 checks, one of 5 faulted marks.
  await h.pool.query(
    `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, started_at, completed_at)
     SELECT t.id, '', r.activity_id, 'flow1:' || r.activity_id, 'Elsa.WriteLine', r.name, r.status, now(), now()
       FROM unnest($1::text[]) WITH ORDINALITY AS t(id, k),
            LATERAL (VALUES ('start', NULL, 'Completed'), ('wait', 'Wait', 'Running'),
                            ('step-' || ((t.k - 1) % 50), 'Step ' || ((t.k - 1) % 7), 'Completed'),
                            ('check-' || ((t.k - 1) % 20), 'Check ' || ((t.k - 1) % 20), 'Completed'),
                            ('mark-' || ((t.k - 1) % 5), 'Mark ' || ((t.k - 1) % 5), 'Faulted')) AS r(activity_id, name, status)`,
    [ids],
  );
  await h.pool.query('ANALYZE workflow_instances; ANALYZE activity_records');
});
afterAll(() => h?.close());

/**
 * The statement's own execution time as Postgres measures it (EXPLAIN ANALYZE, no per-node timing), best
 * of three so that one slow moment of a busy machine does not decide; and the ids the dry-run selects.
 */
async function bestOf3(filter: Filter): Promise<{ ms: number; result: string[] }> {
  const { where, params } = compileFilter(filter, '');
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const { rows } = await h.pool.query(
      `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) SELECT i.id FROM workflow_instances i WHERE ${where} ORDER BY i.created_at, i.id`,
      params,
    );
    best = Math.min(best, (rows[0]['QUERY PLAN'] as { 'Execution Time': number }[])[0]!['Execution Time']);
  }
  return { ms: best, result: await selectInstanceIds(h.pool, filter, '') };
}

describe('activity filters at scale', () => {
  it('refuses more than 20 entries, naming /activityFilters', async () => {
    const r = await h.request('POST', '/alterations/dry-run', {
      body: { activityFilters: Array.from({ length: 200 }, () => ({})) },
    });
    expect(r.status).toBe(400);
    expect(r.body.errors.map((e: { path: string }) => e.path)).toContain('/activityFilters');
  });

  it('selects exactly the right instances among 10,000 with 20 entries, in under 100 ms', async () => {
    // 20 different entries, none implied by another: every pair of fields of three records, and two more.
    const pairs = (r: Record<string, string>) =>
      Object.keys(r).flatMap((a, i) =>
        Object.keys(r)
          .slice(i + 1)
          .map((b) => ({ [a]: r[a], [b]: r[b] })),
      );
    const twenty = [
      ...pairs({ activityId: 'step-7', nodeId: 'flow1:step-7', name: 'Step 0', status: 'Completed' }),
      ...pairs({ activityId: 'check-7', nodeId: 'flow1:check-7', name: 'Check 7', status: 'Completed' }),
      ...pairs({ activityId: 'mark-2', nodeId: 'flow1:mark-2', name: 'Mark 2', status: 'Faulted' }),
      { activityId: 'start', nodeId: 'flow1:start' },
      { activityId: 'wait', status: 'Running' },
    ] as Filter['activityFilters'] & object[];
    expect(new Set(twenty.map((e) => JSON.stringify(e))).size).toBe(20);
    const { ms, result } = await bestOf3({ activityFilters: twenty });
    const expected = ids.filter((_, k) => k % 50 === 7 && k % 7 === 0 && k % 20 === 7 && k % 5 === 2);
    expect(expected.length).toBeGreaterThan(0);
    expect(result).toEqual(expected);
    expect(ms).toBeLessThan(100);

    const broad = [
      ...pairs({ activityId: 'start', nodeId: 'flow1:start', status: 'Completed' }),
      ...pairs({ activityId: 'wait', nodeId: 'flow1:wait', name: 'Wait', status: 'Running' }),
      { status: 'Faulted' },
    ] as Filter['activityFilters'] & object[];
    // Entries every instance satisfies select every instance (a record matches each of them).
    expect(await selectInstanceIds(h.pool, { activityFilters: broad }, '')).toEqual(ids);
    // Every entry must match: one that no record satisfies empties the selection.
    const none = await bestOf3({
      activityFilters: [...twenty.slice(0, 19), { activityId: 'step-7', status: 'Faulted' }],
    });
    expect(none.result).toEqual([]);
    expect(none.ms).toBeLessThan(100);
  });

  it('keeps the semantics: [{}] matches any instance with a record; fields AND within an entry', async () => {
    const [withRecords] = ids;
    await h.pool.query('DELETE FROM activity_records WHERE instance_id = $1', [ids[1]]);
    const any = await selectInstanceIds(h.pool, { activityFilters: [{}] }, '');
    expect(any).toHaveLength(COUNT - 1);
    expect(any).toContain(withRecords);
    expect(any).not.toContain(ids[1]);
    // "Wait" is the wait activity's name, not the start's: both fields must hold on one record.
    expect(await selectInstanceIds(h.pool, { activityFilters: [{ activityId: 'start', name: 'Wait' }] }, '')).toEqual(
      [],
    );
    expect(
      await selectInstanceIds(h.pool, { activityFilters: [{ activityId: 'step-3', name: 'Step 3' }] }, ''),
    ).toEqual(ids.filter((_, k) => k % 50 === 3 && k % 7 === 3));
  });
});
