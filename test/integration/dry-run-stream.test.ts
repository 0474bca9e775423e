import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Filter } from '../../src/alterations/model.js';
import { instanceIdPages, selectInstanceIds } from '../../src/alterations/filter.js';
import type { Queryable } from '../../src/db/pool.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances, withoutWorkflows } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

let h: Harness;

/** The stream's pages as arrays of ids (the route writes each page's JSON text as it is). */
async function* streamInstanceIds(pool: Queryable, filter: Filter, tenantKey: string, pageSize: number) {
  for await (const page of instanceIdPages(pool, filter, tenantKey, pageSize)) {
    yield JSON.parse(`[${page.json}]`) as string[];
  }
}
let ids: string[];

beforeAll(async () => {
  h = await createHarness({ worker: false });
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('stream-def') });
  ids = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 2500 });
  await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 10, tenantId: 'other' });
});
afterAll(() => h?.close());

describe('the streamed dry-run', () => {
  it('answers the same ids in the same order as one query, page by page, and valid JSON over HTTP', async () => {
    const filter = { definitionIds: ['stream-def'] };
    const pages: string[][] = [];
    for await (const page of streamInstanceIds(h.pool, filter, '', 700)) pages.push(page);
    expect(pages.map((p) => p.length)).toEqual([700, 700, 700, 400]);
    expect(pages.flat()).toEqual(await selectInstanceIds(h.pool, filter, ''));
    expect(pages.flat()).toEqual(ids);

    const r = await h.request('POST', '/alterations/dry-run', { body: filter });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body).toEqual({ workflowInstanceIds: ids });
    const none = await h.request('POST', '/alterations/dry-run', { body: { definitionIds: ['nothing'] } });
    expect(none.body).toEqual({ workflowInstanceIds: [] });
  });

  it('writes ids that JSON must escape escaped, on the pages that hold them, and the others as Postgres joined them', async () => {
    const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('stream-odd') });
    // Ids the service never makes (it makes UUIDs), as an import or an older release might have left them.
    const odd = [
      'plain-1',
      'with"quote',
      'back\\slash',
      'plain-2',
      'new\nline',
      'a","b',
      'plain-3',
      'ü-tab\t',
      'plain-4',
    ];
    await withoutWorkflows(
      h.pool,
      `INSERT INTO workflow_instances
         (id, tenant_id, definition_id, definition_version_id, version, status, sub_status, created_at, updated_at)
       SELECT o.id, '', d.definition_id, d.id, d.version, 'Running', 'Suspended',
              now() + o.n * interval '1 microsecond', now()
         FROM workflow_definitions d, unnest($2::text[]) WITH ORDINALITY AS o(id, n)
        WHERE d.id = $1`,
      [def.body.id, odd],
    );
    const filter = { definitionIds: ['stream-odd'] };
    for (const size of [1, 2, 4, 100]) {
      const pages: string[][] = [];
      for await (const page of streamInstanceIds(h.pool, filter, '', size)) pages.push(page);
      expect(pages.flat()).toEqual(odd);
    }
    expect((await h.request('POST', '/alterations/dry-run', { body: filter })).body).toEqual({
      workflowInstanceIds: odd,
    });
  });

  it('reaches the client a page at a time over HTTP, not as one buffered body', async () => {
    const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('stream-big') });
    const many = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 25_000 });
    const res = await h.app.request('/alterations/dry-run', {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ definitionIds: ['stream-big'] }),
    });
    const chunks: string[] = [];
    for await (const chunk of res.body!) chunks.push(Buffer.from(chunk as Uint8Array).toString('utf8'));
    // A first page of 10,000 ids, then the other 15,000, each written as read (and the opening and closing).
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    expect(chunks.join('').endsWith(']}\n')).toBe(true);
    expect(JSON.parse(chunks.join(''))).toEqual({ workflowInstanceIds: many });
  });

  it('holds no connection and no transaction while its reader waits between pages (a client that does not read)', async () => {
    const pages = streamInstanceIds(h.pool, { definitionIds: ['stream-def'] }, '', 1000);
    const first = await pages.next();
    expect(first.value).toHaveLength(1000);
    // The reader stalls here, as a route does while the socket does not take what it wrote.
    expect(h.pool.totalCount - h.pool.idleCount).toBe(0);
    const { rows } = await h.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
    );
    expect(rows[0]!.n).toBe(0);
    const rest: string[] = [];
    for (let p = await pages.next(); !p.done; p = await pages.next()) rest.push(...p.value);
    expect([...first.value!, ...rest]).toEqual(ids);
  });

  it('gives its connection back, with no transaction left open, when the reader stops early', async () => {
    const before = h.pool.totalCount - h.pool.idleCount;
    for await (const page of streamInstanceIds(h.pool, { definitionIds: ['stream-def'] }, '', 100)) {
      expect(page).toHaveLength(100);
      break;
    }
    expect(h.pool.totalCount - h.pool.idleCount).toBe(before);
    const { rows } = await h.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    );
    expect(rows[0]!.n).toBe(0);
  });

  it('is broken off, never ended as if whole, when a page fails after the answer began', async () => {
    const res = await h.app.request('/alterations/dry-run', {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ definitionIds: ['stream-big'] }),
    });
    expect(res.status).toBe(200);
    // The next page's statement fails: the table is gone for a moment. Gone before the first read: the answer
    // has its first page, and the route waits for the reader to take it before it reads the next (the
    // response's stream reads one chunk ahead, so after the first read the second page's statement could
    // already have run: under load, it did, and the answer ended whole).
    await h.pool.query('ALTER TABLE workflow_instances RENAME TO workflow_instances_away');
    try {
      const reader = res.body!.getReader();
      const head = await reader.read();
      expect(new TextDecoder().decode(head.value)).toContain('{"workflowInstanceIds":[');
      const rest = (async () => {
        for (;;) if ((await reader.read()).done) return 'ended';
      })();
      await expect(rest).rejects.toBeDefined();
    } finally {
      await h.pool.query('ALTER TABLE workflow_instances_away RENAME TO workflow_instances');
    }
  });

  it('is still a problem+json answer when the query fails before the first page', async () => {
    const r = await h.request('POST', '/alterations/dry-run', {
      body: {
        definitionIds: ['stream-def'],
        timestampFilters: [{ column: 'CreatedAt', operator: 'LessThan', timestamp: '0000-01-01T00:00:00Z' }],
      },
    });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.headers.get('content-type')).toMatch(/problem\+json/);
  });
});
