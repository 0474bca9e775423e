import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sealCursor } from '../../src/api/cursor.js';
import { serveApi } from '../../src/api/server.js';
import { listInstances } from '../../src/engine/instance-list.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { orderApproval } from '../support/workflows.js';

/** GET /workflow-instances (CONTRACT section 3), and the newcomer's rough edges of issue 14. */
let h: Harness;
let legacy: Harness;
const versionIds: Record<string, string> = {};

async function publish(harness: Harness, definitionId: string, key?: string): Promise<string> {
  const res = await harness.request('POST', '/workflow-definitions', {
    body: orderApproval(definitionId),
    ...(key ? { key } : {}),
  });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** Every page of a listing, following nextCursor until it is null. */
async function allPages(
  query: string,
  opts: { key?: string; limit?: number } = {},
): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let after: string | null = null;
  let pages = 0;
  do {
    const params = new URLSearchParams(query);
    params.set('limit', String(opts.limit ?? 100));
    if (after) params.set('after', after);
    const res = await h.request('GET', `/workflow-instances?${params}`, opts.key ? { key: opts.key } : {});
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.items.length).toBeLessThanOrEqual(opts.limit ?? 100);
    ids.push(...res.body.items.map((i: { id: string }) => i.id));
    after = res.body.nextCursor;
    pages++;
  } while (after !== null && pages < 1000);
  return { ids, pages };
}

/** The ids the database holds for a condition, newest first: what the list must return. */
async function expected(where: string, params: unknown[] = []): Promise<string[]> {
  const { rows } = await h.pool.query<{ id: string }>(
    `SELECT id FROM workflow_instances WHERE ${where} ORDER BY created_at DESC, id DESC`,
    params,
  );
  return rows.map((r) => r.id);
}

beforeAll(async () => {
  h = await createHarness({ worker: false });
  legacy = await createHarness({ worker: false, permissionModel: 'legacy' });
  for (const d of ['alpha', 'beta', 'paged']) versionIds[d] = await publish(h, d);
  // alpha: 30 suspended; beta: 20, of which 8 finished, 5 faulted (with an incident), 7 suspended.
  await seedInstances(h.pool, { definitionVersionId: versionIds.alpha!, count: 30, namePrefix: 'alpha-' });
  const beta = await seedInstances(h.pool, { definitionVersionId: versionIds.beta!, count: 20, namePrefix: 'beta-' });
  await h.pool.query(
    "UPDATE workflow_instances SET status = 'Finished', sub_status = 'Finished', finished_at = now() WHERE id = ANY($1)",
    [beta.slice(0, 8)],
  );
  await h.pool.query(
    `UPDATE workflow_instances SET sub_status = 'Faulted',
            incidents = '[{"activityId":"wait","activityType":"Elsa.Event","message":"boom","timestamp":"2026-01-01T00:00:00.000Z"}]'
      WHERE id = ANY($1)`,
    [beta.slice(8, 13)],
  );
  await h.pool.query("UPDATE workflow_instances SET correlation_id = 'order-7' WHERE id = ANY($1)", [
    [beta[0], beta[15]],
  ]);
  // Names that hold LIKE's wildcards: a search for them must match them literally.
  await h.pool.query("UPDATE workflow_instances SET name = 'Rate 100%' WHERE id = $1", [beta[16]]);
  await h.pool.query("UPDATE workflow_instances SET name = 'Rate 1000' WHERE id = $1", [beta[17]]);
  await h.pool.query("UPDATE workflow_instances SET name = 'a_b' WHERE id = $1", [beta[18]]);
  await h.pool.query("UPDATE workflow_instances SET name = 'axb' WHERE id = $1", [beta[19]]);
});
afterAll(async () => {
  await h?.close();
  await legacy?.close();
});

describe('GET /workflow-instances', () => {
  it('returns summaries of the contract shape, newest first, matching the instance read', async () => {
    const started = await h.request('POST', '/workflow-instances', {
      body: { definitionId: 'alpha', name: 'Mine', correlationId: 'corr-1' },
    });
    expect(started.status).toBe(202);
    const id = started.body.workflowInstanceId as string;
    const res = await h.request('GET', '/workflow-instances?limit=5');
    expect(res.status).toBe(200);
    expect(res.body.items).toHaveLength(5);
    expect(typeof res.body.nextCursor).toBe('string');
    const first = res.body.items[0];
    expect(first.id).toBe(id);
    expect(Object.keys(first).sort()).toEqual(
      [
        'correlationId',
        'createdAt',
        'definitionId',
        'finishedAt',
        'id',
        'incidentCount',
        'name',
        'status',
        'subStatus',
        'updatedAt',
        'version',
      ].sort(),
    );
    const full = (await h.request('GET', `/workflow-instances/${id}`)).body;
    for (const k of Object.keys(first)) expect(first[k], k).toEqual(full[k]);
    expect(first).toMatchObject({
      definitionId: 'alpha',
      version: 1,
      name: 'Mine',
      correlationId: 'corr-1',
      finishedAt: null,
    });
    const all = await allPages('');
    expect(all.ids).toEqual(await expected("tenant_id = ''"));
  });

  it('pages through a set larger than limit: every instance exactly once, newest first, until nextCursor is null', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionIds.paged!,
      count: 257,
      namePrefix: 'paged-',
    });
    // Ties on created_at are ordered by id, and a page boundary inside a tie loses or repeats nothing.
    await h.pool.query(
      "UPDATE workflow_instances SET created_at = (SELECT min(created_at) FROM workflow_instances WHERE id = ANY($1)) + interval '1 second' WHERE id = ANY($1)",
      [ids.slice(100, 140)],
    );
    const { ids: listed, pages } = await allPages('definitionId=paged', { limit: 25 });
    expect(pages).toBe(11);
    expect(new Set(listed).size).toBe(257);
    expect(listed).toEqual(await expected("definition_id = 'paged'"));

    const exact = await allPages('definitionId=paged', { limit: 257 });
    expect(exact.pages).toBe(1);
    const whole = await h.request('GET', '/workflow-instances?definitionId=paged&limit=1000');
    expect(whole.body.items).toHaveLength(257);
    expect(whole.body.nextCursor).toBeNull();
  });

  it.each([
    ['definitionId=beta', "definition_id = 'beta'", 20],
    ['status=Finished', "status = 'Finished'", 8],
    ['status=Running&definitionId=beta', "status = 'Running' AND definition_id = 'beta'", 12],
    ['subStatus=Faulted', "sub_status = 'Faulted'", 5],
    // The 30 seeded and the one the first test started (suspended on its event when the start answered).
    ['subStatus=Suspended&definitionId=alpha', "sub_status = 'Suspended' AND definition_id = 'alpha'", 31],
    ['correlationId=order-7', "correlation_id = 'order-7'", 2],
    ['searchTerm=ALPHA-1', "name ILIKE 'alpha-1%'", 11],
    ['searchTerm=100%25', "name = 'Rate 100%'", 1],
    ['searchTerm=a_b', "name = 'a_b'", 1],
  ])('filters by %s', async (query, where, count) => {
    const want = await expected(`tenant_id = '' AND ${where}`);
    expect(want).toHaveLength(count);
    expect((await allPages(query, { limit: 4 })).ids).toEqual(want);
  });

  it('searchTerm matches a substring of the id, the correlation id and the definition version id', async () => {
    const [target] = await expected("correlation_id = 'order-7'");
    expect((await allPages(`searchTerm=${target!.slice(9, 23)}`)).ids).toEqual([target]);
    expect((await allPages('searchTerm=rder-')).ids).toEqual(await expected("correlation_id = 'order-7'"));
    expect((await allPages(`searchTerm=${versionIds.beta!.slice(-12)}`)).ids).toEqual(
      await expected("definition_id = 'beta'"),
    );
    // Empty is no constraint, as in the alteration filter.
    expect((await allPages('searchTerm=')).ids).toEqual(await expected("tenant_id = ''"));
  });

  it("lists only the caller's tenant", async () => {
    const other = await h.keyWith(['*'], 'tenant-b');
    const theirVersion = await publish(h, 'alpha', other);
    const theirs = await seedInstances(h.pool, {
      definitionVersionId: theirVersion,
      count: 7,
      tenantId: 'tenant-b',
      namePrefix: 'alpha-',
    });
    const mine = await allPages('');
    expect(mine.ids.filter((id) => theirs.includes(id))).toEqual([]);
    expect((await allPages('definitionId=alpha')).ids).toEqual(
      await expected("tenant_id = '' AND definition_id = 'alpha'"),
    );
    expect((await allPages('', { key: other })).ids).toEqual([...theirs].reverse());
    expect((await allPages('searchTerm=alpha', { key: other })).ids).toEqual([...theirs].reverse());
    // A cursor names a position, not a tenant: following it in another tenant still lists only that tenant.
    const page = await h.request('GET', '/workflow-instances?limit=1');
    const next = await h.request('GET', `/workflow-instances?after=${encodeURIComponent(page.body.nextCursor)}`, {
      key: other,
    });
    expect(next.status).toBe(200);
    expect(next.body.items.every((i: { id: string }) => theirs.includes(i.id))).toBe(true);
  });

  it('needs workflows/instances:view (legacy read:workflow-instances)', async () => {
    const anonymous = await h.request('GET', '/workflow-instances', { key: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBeTruthy();
    const lacking = await h.request('GET', '/workflow-instances', {
      key: await h.keyWith(['workflows/instances:execute']),
    });
    expect(lacking.status).toBe(403);
    expect(lacking.body.detail).toContain('"workflows/instances:view"');
    expect(
      (await h.request('GET', '/workflow-instances', { key: await h.keyWith(['workflows/instances:view']) })).status,
    ).toBe(200);

    await seedInstances(legacy.pool, { definitionVersionId: await publish(legacy, 'old-style'), count: 3 });
    const legacyKey = await legacy.keyWith(['read:workflow-instances']);
    const listed = await legacy.request('GET', '/workflow-instances', { key: legacyKey });
    expect(listed.status).toBe(200);
    expect(listed.body.items).toHaveLength(3);
    const structuredOnly = await legacy.request('GET', '/workflow-instances', {
      key: await legacy.keyWith(['workflows/instances:view']),
    });
    expect(structuredOnly.status).toBe(403);
    expect(structuredOnly.body.detail).toContain('"read:workflow-instances"');
  });

  it.each([
    ['status=running', '/query/status'],
    ['subStatus=Waiting', '/query/subStatus'],
    ['status=Finished&subStatus=Done', '/query/subStatus'],
    ['limit=1001', '/query/limit'],
    ['limit=0', '/query/limit'],
    ['limit=ten', '/query/limit'],
    ['after=not-a-cursor', '/query/after'],
    ['definitionIds=alpha', '/query/definitionIds'],
    ['definitionId=', '/query/definitionId'],
    ['searchTerm=a%0Ab', '/query/searchTerm'],
  ])('refuses %s with a 400 naming %s', async (query, path) => {
    const res = await h.request('GET', `/workflow-instances?${query}`);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.errors.map((e: { path: string }) => e.path)).toContain(path);
  });

  it('refuses a cursor that was altered, or issued by another list', async () => {
    const page = await h.request('GET', '/workflow-instances?limit=1');
    const cursor = page.body.nextCursor as string;
    const tampered = `${cursor.slice(0, 5)}${cursor[5] === 'A' ? 'B' : 'A'}${cursor.slice(6)}`;
    for (const after of [tampered, `${cursor}x`]) {
      const res = await h.request('GET', `/workflow-instances?after=${encodeURIComponent(after)}`);
      expect(res.status, after).toBe(400);
      expect(res.body.errors[0].path).toBe('/query/after');
    }
    // Signed with the service's key but not a position of this list (the plan list's shape), or a
    // position Postgres would refuse: a 400, never a 500.
    const positions = [
      ['2026-01-01T00:00:00.000Z', 'x'],
      ['wi', '2026-13-45T00:00:00.000000Z', 'x'],
      ['wi', '2026-02-30T00:00:00.000000Z', 'x'],
      ['wi', '0000-01-01T00:00:00.000000Z', 'x'],
      ['wi', '2026-01-01T00:00:00.000000Z', "x' OR 1=1"],
    ];
    for (const position of positions) {
      const sealed = sealCursor(h.tokens.key, Buffer.from(JSON.stringify(position)).toString('base64url'));
      const res = await h.request('GET', `/workflow-instances?after=${encodeURIComponent(sealed)}`);
      expect(res.status, JSON.stringify(position)).toBe(400);
      expect(res.body.errors[0].path).toBe('/query/after');
    }
  });

  it('is index-backed: a page of 10,000+ instances reads one index in order, whatever the equality filter', async () => {
    await seedInstances(h.pool, { definitionVersionId: versionIds.alpha!, count: 9000, namePrefix: 'bulk-' });
    await seedInstances(h.pool, {
      definitionVersionId: versionIds.beta!,
      count: 3000,
      namePrefix: 'bulk-',
      subStatus: 'Faulted',
    });
    await h.pool.query(
      "UPDATE workflow_instances SET correlation_id = 'c-' || (abs(hashtext(id)) % 500) WHERE name LIKE 'bulk-%'",
    );
    await h.pool.query('ANALYZE workflow_instances');
    const queries = [
      {},
      { definitionId: 'beta' },
      { status: 'Running' as const },
      { subStatus: 'Faulted' as const },
      { correlationId: 'c-7' },
    ];
    for (const q of queries) {
      let statement: { text: string; values: unknown[] } | undefined;
      const capture = {
        query: (text: string, values: unknown[]) => ((statement = { text, values }), h.pool.query(text, values)),
      };
      const first = await listInstances(capture as never, '', { ...q, limit: 100 });
      await listInstances(capture as never, '', { ...q, after: first.nextCursor ?? undefined, limit: 100 });
      const { rows } = await h.pool.query(`EXPLAIN (FORMAT JSON) ${statement!.text}`, statement!.values);
      const plan = JSON.stringify(rows[0]['QUERY PLAN']);
      const what = `${JSON.stringify(q)}: ${plan}`;
      expect(plan, what).toMatch(/"Node Type":"Index (Only )?Scan"/);
      expect(plan, what).toContain('"Scan Direction":"Backward"');
      expect(plan, what).not.toContain('"Node Type":"Sort"');
      expect(plan, what).not.toContain('"Node Type":"Seq Scan"');
    }
  });
});

describe("a newcomer's rough edges", () => {
  let server: Server;
  let base: string;
  beforeAll(async () => {
    server = serveApi(h.app, { port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });

  it('ends JSON and problem+json bodies with a newline, and Content-Length counts it', async () => {
    const auth = { authorization: `ApiKey ${h.adminKey}` };
    for (const [path, headers, status, type] of [
      ['/workflow-instances?limit=2', auth, 200, 'application/json'],
      ['/features/installed', auth, 200, 'application/json'],
      ['/workflow-instances?limit=1001', auth, 400, 'application/problem+json'],
      ['/workflow-instances', {}, 401, 'application/problem+json'],
      ['/no-such-route', auth, 404, 'application/problem+json'],
    ] as const) {
      const res = await fetch(`${base}${path}`, { headers });
      expect(res.status, path).toBe(status);
      expect(res.headers.get('content-type'), path).toContain(type);
      const bytes = Buffer.from(await res.arrayBuffer());
      const text = bytes.toString('utf8');
      expect(text.endsWith('}\n'), `${path}: ${JSON.stringify(text.slice(-10))}`).toBe(true);
      expect(() => JSON.parse(text) as unknown, path).not.toThrow();
      expect(res.headers.get('content-length'), path).toBe(String(bytes.length));
    }
    // HEAD still answers where GET does.
    const head = await fetch(`${base}/workflow-instances`, { method: 'HEAD', headers: auth });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toContain('application/json');
  });

  it('redirects GET / to /docs, without credentials', async () => {
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${base}/`, { method, redirect: 'manual' });
      expect([302, 307], method).toContain(res.status);
      expect(res.headers.get('location'), method).toBe('/docs');
      await res.arrayBuffer();
    }
    const followed = await fetch(`${base}/`);
    expect(followed.status).toBe(200);
    expect(await followed.text()).toContain('/openapi.json');
  });
});
