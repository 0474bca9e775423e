import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countInstances } from '../../src/alterations/filter.js';
import type { Queryable } from '../../src/db/pool.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { chain, event, fault, writeLine } from '../support/workflows.js';

let h: Harness;
const ids: Record<string, string> = {};
let otherTenant: string;
let faultyV1: string;

async function start(definitionId: string, extra: Record<string, unknown> = {}, key?: string) {
  const r = await h.request('POST', '/workflow-instances', {
    body: { definitionId, ...extra },
    ...(key ? { key } : {}),
  });
  expect(r.status).toBe(202);
  const id = r.body.workflowInstanceId as string;
  await eventually(async () => {
    const { rows } = await h.pool.query('SELECT sub_status FROM workflow_instances WHERE id = $1', [id]);
    return ['Suspended', 'Faulted'].includes(rows[0]?.sub_status) ? true : undefined;
  }, `instance ${id} to settle`);
  return id;
}

const dryRun = async (filter: unknown) => {
  const r = await h.request('POST', '/alterations/dry-run', { body: filter });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.workflowInstanceIds as string[];
};
const pick = (...names: string[]) => names.map((n) => ids[n]!);

beforeAll(async () => {
  h = await createHarness();
  const approval = chain('flow-one', [
    writeLine('start', 'started'),
    { ...event('wait', 'approve'), name: 'Wait for approval' },
  ]);
  expect((await h.request('POST', '/workflow-definitions', { body: approval })).status).toBe(201);
  const v1 = await h.request('POST', '/workflow-definitions', {
    body: chain('flow-two', [writeLine('start', 'x'), fault('boom', 'bad')]),
  });
  faultyV1 = v1.body.id;
  await h.request('POST', '/workflow-definitions', {
    body: chain('flow-two', [writeLine('start', 'y'), fault('boom', 'worse')]),
  });

  ids.i1 = await start('flow-one', { name: 'alpha', correlationId: 'corr-1' });
  ids.i2 = await start('flow-one', { name: 'beta', correlationId: 'corr-2' });
  ids.i3 = await start('flow-two', { version: 1, name: 'gamma' });
  ids.i4 = await start('flow-two', { name: 'delta 100%' });
  ids.i5 = await start('flow-one', { name: 'system one' });
  await h.pool.query('UPDATE workflow_instances SET is_system = true WHERE id = $1', [ids.i5]);
  const cancel = await h.request('POST', '/alterations/run', {
    body: { alterations: [{ type: 'Cancel' }], workflowInstanceIds: [ids.i2] },
  });
  expect(cancel.body.results[0].isSuccessful).toBe(true);

  const keyB = await h.keyWith(['*'], 'tenant-b');
  await h.request('POST', '/workflow-definitions', {
    key: keyB,
    body: chain('flow-one', [writeLine('start', 'b'), event('wait', 'approve')]),
  });
  otherTenant = await start('flow-one', { name: 'alpha', correlationId: 'corr-1' }, keyB);
});
afterAll(() => h?.close());

describe('the instance filter', () => {
  it('matches each field, within the tenant only, ordered by creation time', async () => {
    expect(await dryRun({ workflowInstanceIds: [ids.i3, ids.i1, otherTenant] })).toEqual(pick('i1', 'i3'));
    expect(await dryRun({ correlationIds: ['corr-2', 'corr-1'] })).toEqual(pick('i1', 'i2'));
    expect(await dryRun({ names: ['alpha'] })).toEqual(pick('i1'));
    expect(await dryRun({ definitionIds: ['flow-two'] })).toEqual(pick('i3', 'i4'));
    expect(await dryRun({ definitionVersionIds: [faultyV1] })).toEqual(pick('i3'));
    expect(await dryRun({ statuses: ['Finished'] })).toEqual(pick('i2'));
    expect(await dryRun({ statuses: ['Running'] })).toEqual(pick('i1', 'i3', 'i4', 'i5'));
    expect(await dryRun({ subStatuses: ['Faulted', 'Cancelled'] })).toEqual(pick('i2', 'i3', 'i4'));
    expect(await dryRun({ hasIncidents: true })).toEqual(pick('i3', 'i4'));
    expect(await dryRun({ hasIncidents: false })).toEqual(pick('i1', 'i2', 'i5'));
    expect(await dryRun({ isSystem: true })).toEqual(pick('i5'));
    expect(await dryRun({ isSystem: false })).toEqual(pick('i1', 'i2', 'i3', 'i4'));
  });

  it('searches id, name, correlation id, definition id and definition version id, case-insensitively', async () => {
    expect(await dryRun({ searchTerm: 'ALP' })).toEqual(pick('i1'));
    expect(await dryRun({ searchTerm: 'CORR-' })).toEqual(pick('i1', 'i2'));
    expect(await dryRun({ searchTerm: 'flow-two' })).toEqual(pick('i3', 'i4'));
    expect(await dryRun({ searchTerm: faultyV1.slice(-12) })).toEqual(pick('i3'));
    expect(await dryRun({ searchTerm: ids.i5!.slice(-12).toUpperCase() })).toEqual(pick('i5'));
    // LIKE wildcards are literal characters in a search term.
    expect(await dryRun({ searchTerm: '100%' })).toEqual(pick('i4'));
    expect(await dryRun({ searchTerm: '_' })).toEqual([]);
  });

  it('matches activity records: every entry must match some record with all its given fields', async () => {
    expect(await dryRun({ activityFilters: [{ activityId: 'wait', status: 'Running' }] })).toEqual(pick('i1', 'i5'));
    expect(await dryRun({ activityFilters: [{ activityId: 'wait', status: 'Canceled' }] })).toEqual(pick('i2'));
    expect(await dryRun({ activityFilters: [{ name: 'Wait for approval' }] })).toEqual(pick('i1', 'i2', 'i5'));
    expect(await dryRun({ activityFilters: [{ nodeId: 'flow1:boom', status: 'Faulted' }] })).toEqual(pick('i3', 'i4'));
    expect(await dryRun({ activityFilters: [{ activityId: 'start' }, { activityId: 'boom' }] })).toEqual(
      pick('i3', 'i4'),
    );
    expect(await dryRun({ activityFilters: [{ activityId: 'wait' }, { activityId: 'boom' }] })).toEqual([]);
  });

  it('compares timestamps', async () => {
    const { rows } = await h.pool.query('SELECT created_at FROM workflow_instances WHERE id = $1', [ids.i3]);
    const at = (rows[0].created_at as Date).toISOString();
    expect(
      await dryRun({ timestampFilters: [{ column: 'CreatedAt', operator: 'GreaterThan', timestamp: at }] }),
    ).toEqual(pick('i4', 'i5'));
    expect(
      await dryRun({ timestampFilters: [{ column: 'CreatedAt', operator: 'LessThanOrEqual', timestamp: at }] }),
    ).toEqual(pick('i1', 'i2', 'i3'));
    expect(await dryRun({ timestampFilters: [{ column: 'CreatedAt', operator: 'Is', timestamp: at }] })).toEqual(
      pick('i3'),
    );
    expect(await dryRun({ timestampFilters: [{ column: 'CreatedAt', operator: 'IsNot', timestamp: at }] })).toEqual(
      pick('i1', 'i2', 'i4', 'i5'),
    );
    expect(
      await dryRun({
        timestampFilters: [{ column: 'FinishedAt', operator: 'GreaterThanOrEqual', timestamp: '2000-01-01T00:00:00Z' }],
      }),
    ).toEqual(pick('i2'));
    expect(
      await dryRun({
        timestampFilters: [
          { column: 'UpdatedAt', operator: 'LessThan', timestamp: '2999-01-01T00:00:00+02:00' },
          { column: 'CreatedAt', operator: 'GreaterThanOrEqual', timestamp: at },
        ],
      }),
    ).toEqual(pick('i3', 'i4', 'i5'));
  });

  it('combines fields with AND', async () => {
    expect(await dryRun({ definitionIds: ['flow-one'], statuses: ['Running'] })).toEqual(pick('i1', 'i5'));
    expect(await dryRun({ definitionIds: ['flow-one'], hasIncidents: true })).toEqual([]);
    expect(await dryRun({ names: ['alpha'], correlationIds: ['corr-1'], searchTerm: 'alp', isSystem: false })).toEqual(
      pick('i1'),
    );
  });

  it('selects nothing without a constraint unless emptyFilterSelectsAll is true', async () => {
    expect(await dryRun({})).toEqual([]);
    expect(await dryRun({ workflowInstanceIds: [], names: null, activityFilters: [], searchTerm: '' })).toEqual([]);
    expect(await dryRun({ emptyFilterSelectsAll: false })).toEqual([]);
    expect(await dryRun({ emptyFilterSelectsAll: true })).toEqual(pick('i1', 'i2', 'i3', 'i4', 'i5'));
  });

  it('rejects unknown properties and enum values, naming them', async () => {
    const cases: [unknown, string][] = [
      [{ nmes: ['alpha'] }, '/nmes'],
      [{ statuses: ['Runing'] }, '/statuses/0'],
      [{ subStatuses: ['Paused'] }, '/subStatuses/0'],
      [{ hasIncidents: 'yes' }, '/hasIncidents'],
      [{ activityFilters: [{ activity: 'wait' }] }, '/activityFilters/0/activity'],
      [{ activityFilters: [{ status: 'Done' }] }, '/activityFilters/0/status'],
      [
        { timestampFilters: [{ column: 'StartedAt', operator: 'Is', timestamp: '2026-01-01T00:00:00Z' }] },
        '/timestampFilters/0/column',
      ],
      [
        { timestampFilters: [{ column: 'CreatedAt', operator: 'Before', timestamp: '2026-01-01T00:00:00Z' }] },
        '/timestampFilters/0/operator',
      ],
      [
        { timestampFilters: [{ column: 'CreatedAt', operator: 'Is', timestamp: 'yesterday' }] },
        '/timestampFilters/0/timestamp',
      ],
      [{ searchTerm: 'a\u0001b' }, '/searchTerm'],
      [{ tenantId: 'tenant-b', emptyFilterSelectsAll: true }, '/tenantId'],
    ];
    for (const [body, path] of cases) {
      const r = await h.request('POST', '/alterations/dry-run', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(
        r.body.errors.map((e: { path: string }) => e.path),
        JSON.stringify(body),
      ).toContain(path);
    }
    const submit = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'Cancel' }], filter: { nmes: ['alpha'] } },
    });
    expect(submit.status).toBe(400);
    expect(submit.body.errors[0].path).toBe('/filter/nmes');
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM alteration_plans');
    expect(rows[0].n).toBe(0);
  });

  it('counts (countOnly) the instances it lists, by definition across its versions, within the tenant', async () => {
    const count = async (filter: unknown) => {
      const r = await h.request('POST', '/alterations/dry-run?countOnly=true', { body: filter });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.count as number;
    };
    // flow-two's instances are on two versions; flow-one is a definition of tenant-b too, with an instance there.
    for (const filter of [
      { definitionIds: ['flow-two'] },
      { definitionIds: ['flow-one'] },
      { definitionIds: ['flow-one', 'flow-two', 'flow-one'] },
      { definitionIds: ['no-such-definition'] },
      { definitionIds: ['flow-two'], definitionVersionIds: [faultyV1] },
      { definitionIds: ['flow-one', 'flow-two'], statuses: ['Running'] },
      { definitionIds: ['flow-one'], isSystem: false },
    ]) {
      expect(await count(filter), JSON.stringify(filter)).toBe((await dryRun(filter)).length);
    }
    expect(await count({ definitionIds: ['flow-two'] })).toBe(2);
    expect(await count({ definitionIds: ['flow-one'] })).toBe(3);
  });

  it("counts by definition from the versions' small index, not from the instances' rows", async () => {
    const { rows: defs } = await h.pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'flow-one' AND tenant_id = ''",
    );
    await seedInstances(h.pool, { definitionVersionId: defs[0]!.id, count: 2000, tenantId: 'tenant-d' });
    await h.pool.query('VACUUM ANALYZE workflow_instances');
    const statements: { text: string; values: unknown[] }[] = [];
    const recording = {
      query: (text: string, values: unknown[]) => {
        statements.push({ text, values });
        return h.pool.query(text, values);
      },
    } as unknown as Queryable;
    expect(await countInstances(recording, { definitionIds: ['flow-one'] }, 'tenant-d')).toBe(2000);
    const client = await h.pool.connect();
    try {
      await client.query('SET enable_seqscan = off');
      const { rows } = await client.query(`EXPLAIN ${statements[0]!.text}`, statements[0]!.values);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toContain('workflow_instances_tenant_definition_version');
      expect(plan).not.toContain('workflow_instances_tenant_definition_created');
    } finally {
      await client.query('RESET enable_seqscan');
      client.release();
    }
  });

  it("holds an instance's definition to its version's (migration 022)", async () => {
    const { rows } = await h.pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'flow-one' AND tenant_id = ''",
    );
    const wrong = h.pool.query(
      `INSERT INTO workflow_instances (id, tenant_id, definition_id, definition_version_id, version, status, sub_status,
                                       variables, scheduled, bookmarks, created_at, updated_at)
       VALUES ('mismatched', '', 'flow-two', $1, 1, 'Running', 'Suspended', '{}', '[]', '[]', now(), now())`,
      [rows[0]!.id],
    );
    await expect(wrong).rejects.toMatchObject({ code: '23503' });
    await expect(
      h.pool.query("UPDATE workflow_instances SET definition_id = 'flow-two' WHERE id = $1", [ids.i1]),
    ).rejects.toMatchObject({ code: '23503' });
  });

  it('is served by indexes', async () => {
    // The search text sits beside the instances, behind a trigram index, kept by triggers.
    const { rows: defs } = await h.pool.query(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'flow-one' AND tenant_id = ''",
    );
    await seedInstances(h.pool, { definitionVersionId: defs[0].id, count: 2000, tenantId: 'tenant-c' });
    await h.pool.query('ANALYZE workflow_instance_search');
    const client = await h.pool.connect();
    try {
      await client.query('SET enable_seqscan = off');
      const { rows } = await client.query(
        "EXPLAIN SELECT instance_id FROM workflow_instance_search s WHERE s.tenant_id = 'tenant-c' AND s.search ILIKE '%seeded-1234%'",
      );
      expect(rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('workflow_instance_search_trgm');
    } finally {
      await client.query('RESET enable_seqscan');
      client.release();
    }
  });
});
