import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { orderApproval } from '../support/workflows.js';

/** CONTRACT section 8: every bad value is a 400 naming the field, never a 500. */
let h: Harness;
let instanceId: string;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  expect((await h.request('POST', '/workflow-definitions', { body: orderApproval('input-def') })).status).toBe(201);
  const created = await h.request('POST', '/workflow-instances', { body: { definitionId: 'input-def' } });
  expect(created.status).toBe(202);
  instanceId = created.body.workflowInstanceId;
});
afterAll(() => h?.close());

/** Sends the request and expects a 400 problem naming `path` among its errors. */
async function expect400(
  method: string,
  path: string,
  field: string,
  body?: unknown,
  opts: { rawBody?: string; key?: string | null } = {},
) {
  const r = await h.request(method, path, { ...(body !== undefined ? { body } : {}), ...opts });
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect(r.headers.get('content-type')).toBe('application/problem+json');
  expect(
    r.body.errors.map((e: { path: string }) => e.path),
    JSON.stringify(r.body),
  ).toContain(field);
  return r;
}

const nested = (depth: number): unknown => (depth === 0 ? 1 : [nested(depth - 1)]);
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const run = (value: unknown) => ({
  alterations: [{ type: 'ModifyVariable', variableId: 'approved', value }],
  workflowInstanceIds: ['missing'],
});

describe('strings: no NUL, well-formed Unicode', () => {
  it('refuses NUL in bodies, including the unauthenticated login, naming the field', async () => {
    await expect400('POST', '/identity/login', '/username', { username: 'ad\u0000min', password: 'x' }, { key: null });
    await expect400('POST', '/workflow-definitions', '/name', { ...orderApproval('nul-def'), name: 'a\u0000b' });
    await expect400('POST', '/connection-configuration', '/name', {
      name: 'n\u0000',
      connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
      connectionConfiguration: { baseUrl: 'http://example.test' },
    });
    await expect400('POST', '/alterations/dry-run', '/names/1', { names: ['ok', 'bad\u0000'] });
    await expect400('POST', '/events/approve/trigger', '/correlationId', { correlationId: '\u0000' });
    await expect400('POST', '/workflow-instances', '/variables/k\u0000ey', {
      definitionId: 'input-def',
      variables: { 'k\u0000ey': 1 },
    });
  });

  it('refuses NUL in query values and path parameters', async () => {
    await expect400('GET', '/workflow-instances/abc%00def', '/params/id');
    await expect400('GET', '/workflow-definitions/input-def%00', '/params/definitionId');
    await expect400('GET', '/connection-configuration?connectionType=%00', '/query/connectionType');
    await expect400('GET', '/alterations/workflows/retry?workflowInstanceIds=a%00', '/query/workflowInstanceIds');
  });

  it('refuses paths and queries that are not percent-encoded UTF-8, instead of taking them literally', async () => {
    const r = await expect400('POST', '/events/%FF/trigger', '/path', {});
    expect(r.body.errors[0].message).toBe('is not valid percent-encoded UTF-8');
    // A lone surrogate, percent-encoded.
    await expect400('POST', '/events/%ED%A0%80/trigger', '/path', {});
    await expect400('GET', '/workflow-instances/%FF', '/path');
    await expect400('GET', '/workflow-instances?correlationId=%C3', '/query');
    // Well-formed: an event named with a percent sign and a non-ASCII letter.
    const ok = await h.request('POST', '/events/100%25-%C3%A9/trigger', { body: {} });
    expect(ok.status).toBe(200);
  });

  it('refuses lone surrogates before they reach jsonb', async () => {
    const r = await expect400('POST', '/workflow-instances', '/variables/note', {
      definitionId: 'input-def',
      variables: { note: 'x\ud800' },
    });
    expect(r.body.errors[0].message).toMatch(/surrogate/);
    await expect400('POST', '/alterations/run', '/alterations/0/value', run('\udc00'));
    // The raw escape, as an attacker would send it.
    await expect400('POST', '/alterations/dry-run', '/searchTerm', undefined, { rawBody: '{"searchTerm":"\\ud83d"}' });
    // A well-formed pair is fine.
    expect((await h.request('POST', '/alterations/run', { body: run('ok \ud83d\ude00') })).status).toBe(200);
  });

  it('refuses bodies that are not UTF-8', async () => {
    const res = await h.app.request('/alterations/dry-run', {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.adminKey}`, 'content-type': 'application/json' },
      body: Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x73, 0x22, 0x3a, 0x5b, 0x22, 0xff, 0x22, 0x5d, 0x7d]),
    });
    expect(res.status).toBe(400);
  });
});

describe('plan ids', () => {
  it('refuse "." and "..", which no path can address, naming the field', async () => {
    for (const id of ['.', '..']) {
      const r = await h.request('POST', '/alterations/submit', {
        body: { id, alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: ['x'] } },
      });
      expect(r.status, id).toBe(400);
      expect(r.body.errors.map((e: { path: string }) => e.path)).toContain('/id');
    }
    expect(
      (
        await h.request('POST', '/alterations/submit', {
          body: { id: '..x', alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: ['x'] } },
        })
      ).status,
    ).toBe(202);
  });
});

describe('property names', () => {
  it('refuse __proto__ wherever it appears, naming it, instead of dropping it silently', async () => {
    await expect400('POST', '/workflow-instances', '/variables/__proto__', undefined, {
      rawBody: '{"definitionId":"input-def","variables":{"__proto__":{"approved":true}}}',
    });
    await expect400('POST', '/connection-configuration', '/connectionConfiguration/__proto__', undefined, {
      rawBody:
        '{"name":"proto","connectionType":"Elsa.Connections.Http.HttpConnectionConfiguration","connectionConfiguration":{"baseUrl":"http://x.example/","__proto__":{"timeoutMs":5}}}',
    });
    const { rowCount } = await h.pool.query("SELECT 1 FROM connection_configurations WHERE name = 'proto'");
    expect(rowCount).toBe(0);
  });
});

describe('integers stored or used in SQL fit in 32 bits', () => {
  it('refuses 2^31 in version, targetVersion and paging values', async () => {
    await expect400('GET', '/workflow-definitions/input-def?version=2147483648', '/query/version');
    await expect400('POST', '/workflow-instances', '/version', { definitionId: 'input-def', version: 2147483648 });
    await expect400('POST', '/alterations/submit', '/alterations/0/targetVersion', {
      alterations: [{ type: 'Migrate', targetVersion: 2147483648 }],
      filter: { names: ['x'] },
    });
    await expect400('POST', '/alterations/run', '/alterations/0/targetVersion', {
      alterations: [{ type: 'Migrate', targetVersion: 2 ** 53 }],
      workflowInstanceIds: [instanceId],
    });
    await expect400('GET', '/alterations?limit=2147483648', '/query/limit');
    await expect400('GET', '/connection-configuration?skip=2147483648', '/query/skip');
    await expect400('GET', '/connection-configuration?take=99999999999', '/query/take');
    // 2^31 - 1 is a valid (unknown) version.
    expect((await h.request('GET', '/workflow-definitions/input-def?version=2147483647')).status).toBe(404);
  });
});

describe('timestamps: years 1 to 9999, offsets within ±18:00', () => {
  const filterAt = (timestamp: string, operator = 'GreaterThan') => ({
    timestampFilters: [{ column: 'CreatedAt', operator, timestamp }],
  });

  it('refuses year 0000 and offset +23:59, naming the field', async () => {
    await expect400('POST', '/alterations/dry-run', '/timestampFilters/0/timestamp', filterAt('0000-01-01T00:00:00Z'));
    await expect400(
      'POST',
      '/alterations/dry-run',
      '/timestampFilters/0/timestamp',
      filterAt('2026-01-01T00:00:00+23:59'),
    );
    await expect400('POST', '/alterations/submit', '/filter/timestampFilters/0/timestamp', {
      alterations: [{ type: 'Cancel' }],
      filter: filterAt('2026-01-01T00:00:00-18:01'),
    });
  });

  it('accepts the extremes, offsets Postgres cannot parse included, with the right meaning', async () => {
    const ids = async (filter: unknown) => {
      const r = await h.request('POST', '/alterations/dry-run', { body: filter });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.workflowInstanceIds as string[];
    };
    expect(await ids(filterAt('0001-01-01T00:00:00+18:00'))).toEqual([instanceId]);
    expect(await ids(filterAt('9999-12-31T23:59:59.999-18:00'))).toEqual([]);
    expect(await ids(filterAt('9999-12-31T23:59:59.999-18:00', 'LessThan'))).toEqual([instanceId]);
    // +17:00 is the same instant as 17 hours earlier in UTC.
    const { rows } = await h.pool.query<{ created_at: Date }>(
      'SELECT created_at FROM workflow_instances WHERE id = $1',
      [instanceId],
    );
    const created = rows[0]!.created_at.getTime();
    const local = (ms: number) => new Date(ms).toISOString().slice(0, 23);
    expect(await ids(filterAt(`${local(created + 17 * 3600_000 - 1000)}+17:00`))).toEqual([instanceId]);
    expect(await ids(filterAt(`${local(created + 17 * 3600_000 + 1000)}+17:00`))).toEqual([]);
  });
});

describe('paging cursors the service did not issue', () => {
  it('are a 400 naming /query/after on every paged endpoint', async () => {
    const submitted = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'Cancel' }], filter: { names: ['nobody'] } },
    });
    expect(submitted.status).toBe(202);
    const planId = submitted.body.planId;
    const crafted = [
      b64(['x', 'y']),
      b64(['0000-01-01T00:00:00.000Z', 'a']),
      b64([1e300]),
      b64([-1]),
      b64([2147483648]),
      b64(['2026-01-01T00:00:00.000Z', 'id']),
      'garbage',
      '%00',
      `${b64([5])}.AAAAAAAAAAAAAAAAAAAAAA`,
    ];
    for (const after of crafted) {
      await expect400('GET', `/alterations?after=${encodeURIComponent(after)}`, '/query/after');
      await expect400('GET', `/alterations/${planId}/jobs?after=${encodeURIComponent(after)}`, '/query/after');
    }
  });

  it('still page with the cursors the service issued', async () => {
    for (let i = 0; i < 2; i++) {
      expect(
        (
          await h.request('POST', '/alterations/submit', {
            body: { alterations: [{ type: 'Cancel' }], filter: { names: [`n${i}`] } },
          })
        ).status,
      ).toBe(202);
    }
    const first = await h.request('GET', '/alterations?limit=1');
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const second = await h.request('GET', `/alterations?limit=1&after=${encodeURIComponent(first.body.nextCursor)}`);
    expect(second.status).toBe(200);
    expect(second.body.items[0].id).not.toBe(first.body.items[0].id);
    // A cursor of one endpoint is not one of the other.
    await expect400(
      'GET',
      `/alterations/${first.body.items[0].id}/jobs?after=${encodeURIComponent(first.body.nextCursor)}`,
      '/query/after',
    );
  });
});

describe('JSON depth', () => {
  it('accepts 64 levels and refuses 65, naming where', async () => {
    // body (1) > alterations (2) > alteration (3) > value: 61 arrays make 64 levels.
    expect((await h.request('POST', '/alterations/run', { body: run(nested(61)) })).status).toBe(200);
    const r = await expect400('POST', '/alterations/run', `/alterations/0/value${'/0'.repeat(61)}`, run(nested(62)));
    expect(r.body.errors[0].message).toMatch(/64/);
  });

  it('refuses a body nested 5,000 deep (and 30,000 deep), unauthenticated routes included', async () => {
    const deep = (n: number) => `{"username":${'['.repeat(n)}${']'.repeat(n)},"password":"x"}`;
    for (const n of [5000, 30000]) {
      const r = await h.request('POST', '/identity/login', { rawBody: deep(n), key: null });
      expect(r.status).toBe(400);
    }
    const r = await h.request('POST', '/workflow-definitions', {
      rawBody: `{"variables":[{"id":"v","typeName":"Object","value":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}]}`,
    });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].path).toMatch(/^\/variables\/0\/value\/a\/a/);
  });
});

describe('bounded filters', () => {
  it('refuses filters past the limits, naming the field', async () => {
    const activityFilters = Array.from({ length: 200 }, () => ({}));
    await expect400('POST', '/alterations/dry-run', '/activityFilters', { activityFilters });
    await expect400('POST', '/alterations/submit', '/filter/activityFilters', {
      alterations: [{ type: 'Cancel' }],
      filter: { activityFilters },
    });
    await expect400('POST', '/alterations/dry-run', '/activityFilters', {
      activityFilters: activityFilters.slice(0, 21),
    });
    const ts = { column: 'CreatedAt', operator: 'LessThan', timestamp: '2030-01-01T00:00:00Z' };
    await expect400('POST', '/alterations/dry-run', '/timestampFilters', {
      timestampFilters: Array.from({ length: 11 }, () => ts),
    });
    await expect400('POST', '/alterations/dry-run', '/names', {
      names: Array.from({ length: 1001 }, (_, i) => `n${i}`),
    });
    await expect400('POST', '/alterations/dry-run', '/correlationIds/0', { correlationIds: ['x'.repeat(1025)] });
    await expect400('POST', '/alterations/dry-run', '/activityFilters/0/activityId', {
      activityFilters: [{ activityId: 'x'.repeat(1025) }],
    });
    await expect400('POST', '/alterations/dry-run', '/searchTerm', { searchTerm: 'x'.repeat(1025) });
  });

  it('accepts filters at the limits', async () => {
    const r = await h.request('POST', '/alterations/dry-run', {
      body: {
        names: Array.from({ length: 1000 }, (_, i) => (i === 0 ? 'x'.repeat(1024) : `n${i}`)),
        activityFilters: Array.from({ length: 20 }, () => ({ activityId: 'start' })),
        timestampFilters: Array.from({ length: 10 }, () => ({
          column: 'CreatedAt',
          operator: 'LessThan',
          timestamp: '2999-01-01T00:00:00Z',
        })),
      },
    });
    expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(200);
  });
});

describe('idempotent resubmit', () => {
  it('treats absent, null and [] filter fields as the same body', async () => {
    const alterations = [{ type: 'ModifyVariable', variableId: 'approved', value: null }];
    const first = await h.request('POST', '/alterations/submit', {
      body: { id: 'same-meaning', alterations, filter: { names: ['nobody'], definitionIds: null } },
    });
    expect(first.status).toBe(202);
    const again = await h.request('POST', '/alterations/submit', {
      body: {
        id: 'same-meaning',
        alterations,
        filter: {
          definitionIds: [],
          names: ['nobody'],
          correlationIds: null,
          activityFilters: [],
          emptyFilterSelectsAll: false,
        },
      },
    });
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body.planId).toBe('same-meaning');
    const absent = await h.request('POST', '/alterations/submit', {
      body: { id: 'same-meaning', alterations, filter: { names: ['nobody'] } },
    });
    expect(absent.status).toBe(202);
    // A body that means something else is still a conflict.
    const other = await h.request('POST', '/alterations/submit', {
      body: { id: 'same-meaning', alterations, filter: { names: ['somebody'] } },
    });
    expect(other.status).toBe(409);
  });
});

describe('methods and the OpenAPI document', () => {
  it('answers a known path with an unsupported method with 405 and Allow', async () => {
    const r = await h.request('DELETE', '/alterations/submit');
    expect(r.status).toBe(405);
    expect(r.headers.get('content-type')).toBe('application/problem+json');
    // A route of its own is not also a plan id: /alterations/submit allows POST only.
    expect(r.headers.get('allow')).toBe('POST');
    expect((await h.request('OPTIONS', '/alterations/preview')).headers.get('allow')).toBe('POST');
    expect((await h.request('PATCH', '/alterations/some-plan')).headers.get('allow')).toBe('GET, HEAD');
    for (const id of ['submit', 'dry-run', 'run', 'preview', 'workflows']) {
      const taken = await h.request('POST', '/alterations/submit', {
        body: { id, alterations: [{ type: 'Cancel' }], filter: { names: ['nobody'] } },
      });
      expect(taken.status, id).toBe(400);
      expect(taken.body.errors[0].path).toBe('/id');
    }
    const health = await h.request('PUT', '/health', { body: {} });
    expect(health.status).toBe(405);
    expect(health.headers.get('allow')).toBe('GET, HEAD');
    expect((await h.request('GET', '/no/such/path')).status).toBe(404);
  });

  it('documents 400, 500 and 503 on every operation, and the 32-bit bounds', async () => {
    const doc = (await h.request('GET', '/openapi.json', { key: null })).body;
    for (const [path, item] of Object.entries(
      doc.paths as Record<string, Record<string, { responses: Record<string, unknown>; parameters?: unknown[] }>>,
    )) {
      for (const [method, op] of Object.entries(item)) {
        expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['500', '503']));
        expect(Object.keys(op.responses), `${method} ${path}`).toContain('400');
      }
    }
    const limit = doc.paths['/alterations'].get.parameters.find((p: { name: string }) => p.name === 'limit');
    expect(limit.schema.maximum).toBe(100);
    const jobsLimit = doc.paths['/alterations/{planId}/jobs'].get.parameters.find(
      (p: { name: string }) => p.name === 'limit',
    );
    expect(jobsLimit.schema.maximum).toBe(1000);
    const version = doc.paths['/workflow-definitions/{definitionId}'].get.parameters.find(
      (p: { name: string }) => p.name === 'version',
    );
    expect(version.schema.maximum).toBe(2147483647);
    expect(JSON.stringify(doc.components.schemas.Alteration)).toContain('2147483647');
    expect(JSON.stringify(doc.components.schemas.WorkflowInstanceFilter.properties.activityFilters)).toContain(
      '"maxItems":20',
    );
  });
});
