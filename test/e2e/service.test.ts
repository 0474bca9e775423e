import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/auth/api-keys.js';
import { createHarness, type Harness } from '../support/harness.js';
import { orderApproval } from '../support/workflows.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(async () => {
  await h?.close();
});

const expectProblem = (res: { status: number; headers: Headers; body: any }, status: number) => {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
  expect(res.body).toMatchObject({
    type: expect.any(String),
    title: expect.any(String),
    status,
    detail: expect.any(String),
  });
};

describe('service endpoints', () => {
  it('GET /health reports both checks without credentials', async () => {
    const res = await h.request('GET', '/health', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', checks: { postgres: 'ok', temporal: 'ok' } });
  });

  it('GET /openapi.json is OpenAPI 3.1 and shows every operation with its permission', async () => {
    const res = await h.request('GET', '/openapi.json', { key: null });
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const ops = Object.entries(res.body.paths as Record<string, Record<string, any>>).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ path, method, op })),
    );
    expect(ops.length).toBeGreaterThanOrEqual(8);
    for (const { op } of ops) expect(op['x-permission']).toBeDefined();
    const publish = ops.find((o) => o.path === '/workflow-definitions' && o.method === 'post')!;
    expect(publish.op['x-permission']).toEqual({
      structured: 'workflows/definitions:create',
      legacy: 'write:workflow-definitions',
    });
    // The request schema documented is the one that validates: strict, so unknown properties are refused.
    const body = publish.op.requestBody.content['application/json'].schema;
    expect(body.$ref ?? body.type).toBeDefined();
    expect(res.body.components.schemas.WorkflowDefinitionRequest.additionalProperties).toBe(false);
  });

  it('GET /docs renders a reference page from local assets', async () => {
    const page = await h.app.request('/docs');
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('/openapi.json');
    const asset = await h.app.request('/docs/assets/swagger-ui-bundle.js');
    expect(asset.status).toBe(200);
  });
});

describe('authentication', () => {
  it('no credentials is a 401 with WWW-Authenticate', async () => {
    const res = await h.request('GET', '/workflow-definitions/x', { key: null });
    expectProblem(res, 401);
    expect(res.headers.get('www-authenticate')).toContain('ApiKey');
  });

  it('an unknown key, an unknown scheme and an unverifiable bearer token are 401', async () => {
    expectProblem(await h.request('GET', '/workflow-definitions/x', { key: 'wfa_not-a-key' }), 401);
    const basic = await h.app.request('/workflow-definitions/x', { headers: { authorization: 'Basic dTpw' } });
    expect(basic.status).toBe(401);
    const bearer = await h.app.request('/workflow-definitions/x', { headers: { authorization: 'Bearer abc.def.ghi' } });
    expect(bearer.status).toBe(401);
  });

  it('a missing permission is a 403 naming it', async () => {
    const key = await h.keyWith(['workflows/definitions:view']);
    const res = await h.request('POST', '/workflow-definitions', { key, body: orderApproval() });
    expectProblem(res, 403);
    expect(res.body.detail).toContain('workflows/definitions:create');
  });

  it('a legacy string authorizes nothing in the structured model', async () => {
    const key = await h.keyWith(['write:workflow-definitions']);
    expectProblem(await h.request('POST', '/workflow-definitions', { key, body: orderApproval() }), 403);
  });

  it('wildcards grant what they cover', async () => {
    const resourceWide = await h.keyWith(['workflows/definitions:*']);
    expect(
      (await h.request('POST', '/workflow-definitions', { key: resourceWide, body: orderApproval('wild-1') })).status,
    ).toBe(201);
    const viewAll = await h.keyWith(['*:view']);
    expect((await h.request('GET', '/workflow-definitions/wild-1', { key: viewAll })).status).toBe(200);
    expectProblem(
      await h.request('POST', '/workflow-definitions', { key: viewAll, body: orderApproval('wild-2') }),
      403,
    );
  });

  it('the 401 and 403 come before body validation', async () => {
    expectProblem(await h.request('POST', '/workflow-definitions', { key: null, body: { nonsense: true } }), 401);
    const key = await h.keyWith(['alterations:view']);
    expectProblem(await h.request('POST', '/workflow-definitions', { key, body: { nonsense: true } }), 403);
  });
});

describe('API keys', () => {
  it('are shown once, stored only as a hash, and work at once', async () => {
    const res = await h.request('POST', '/identity/api-keys', {
      body: { name: 'ci', permissions: ['workflows/definitions:view'] },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.any(String),
      name: 'ci',
      key: expect.stringMatching(/^wfa_/),
      permissions: ['workflows/definitions:view'],
      tenantId: null,
    });
    const { rows } = await h.pool.query('SELECT key_hash FROM api_keys WHERE id = $1', [res.body.id]);
    expect(rows[0].key_hash).toBe(hashApiKey(res.body.key));
    const dump = await h.pool.query(
      'SELECT count(*)::int AS n FROM api_keys WHERE key_hash = $1 OR name = $1 OR $1 = ANY(permissions)',
      [res.body.key],
    );
    expect(dump.rows[0].n).toBe(0);
    expect((await h.request('GET', '/workflow-definitions', { key: res.body.key })).status).toBe(200);
    expect(JSON.stringify(h.logs)).not.toContain(res.body.key);
  });

  it('a tenant principal cannot place a key in another tenant, nor grant what it lacks', async () => {
    const tenantAdmin = await h.keyWith(['identity/api-keys:create', 'alterations:view'], 'acme');
    const elsewhere = await h.request('POST', '/identity/api-keys', {
      key: tenantAdmin,
      body: { name: 'x', permissions: [], tenantId: 'globex' },
    });
    expectProblem(elsewhere, 403);
    const escalate = await h.request('POST', '/identity/api-keys', {
      key: tenantAdmin,
      body: { name: 'x', permissions: ['*'] },
    });
    expectProblem(escalate, 403);
    const ok = await h.request('POST', '/identity/api-keys', {
      key: tenantAdmin,
      body: { name: 'x', permissions: ['alterations:view'] },
    });
    expect(ok.status).toBe(201);
    expect(ok.body.tenantId).toBe('acme');
    const placed = await h.request('POST', '/identity/api-keys', {
      body: { name: 'y', permissions: ['*:view'], tenantId: 'globex' },
    });
    expect(placed.body.tenantId).toBe('globex');
  });
});

describe('request hygiene', () => {
  it('malformed JSON is a 400', async () => {
    expectProblem(await h.request('POST', '/workflow-definitions', { rawBody: '{"definitionId": ' }), 400);
  });

  it('a body that is not JSON is a 415', async () => {
    const res = await h.request('POST', '/workflow-definitions', {
      rawBody: 'definitionId=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectProblem(res, 415);
  });

  it('a body over MAX_BODY_BYTES is a 413', async () => {
    const big = { ...orderApproval('big'), description: 'x'.repeat(70 * 1024) };
    expectProblem(await h.request('POST', '/workflow-definitions', { body: big }), 413);
  });

  it('an unknown property is a 400 that names it, and a tenantId in a body is refused', async () => {
    const res = await h.request('POST', '/workflow-definitions', {
      body: { ...orderApproval('typo'), tenantId: 'other', nmae: 'x' },
    });
    expectProblem(res, 400);
    expect(res.body.errors).toEqual(
      expect.arrayContaining([
        { path: '/tenantId', message: 'Unknown property "tenantId"' },
        { path: '/nmae', message: 'Unknown property "nmae"' },
      ]),
    );
  });

  it('an unknown route is a problem+json 404, and errors carry the request id as traceId', async () => {
    const res = await h.request('GET', '/nowhere', { headers: { 'x-request-id': 'trace-me-1' } });
    expectProblem(res, 404);
    expect(res.body.traceId).toBe('trace-me-1');
    expect(res.headers.get('x-request-id')).toBe('trace-me-1');
  });

  it('credentials never reach the log', async () => {
    await h.request('GET', '/workflow-definitions');
    expect(JSON.stringify(h.logs)).not.toContain(h.adminKey);
    expect(h.logs.some((l) => l.msg === 'request' && l.requestId)).toBe(true);
  });
});
