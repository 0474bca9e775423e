import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isKnownGrant, LEGACY_PERMISSIONS, STRUCTURED_PERMISSIONS } from '../../src/auth/permissions.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * Every route of the contract with the permission it requires in each model ('signed-in': any principal;
 * 'public': none). The last test checks that the OpenAPI document has no route missing from this table.
 */
const ROUTES: { method: string; path: string; structured: string; legacy: string }[] = [
  { method: 'POST', path: '/alterations/submit', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'POST', path: '/alterations/dry-run', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'POST', path: '/alterations/preview', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'POST', path: '/alterations/run', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'GET', path: '/alterations/workflows/retry', structured: 'alterations:execute', legacy: 'run:alterations' },
  {
    method: 'POST',
    path: '/alterations/workflows/retry',
    structured: 'alterations:execute',
    legacy: 'run:alterations',
  },
  { method: 'POST', path: '/alterations/p1/cancel', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'POST', path: '/alterations/p1/pause', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'POST', path: '/alterations/p1/resume', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'PATCH', path: '/alterations/p1/rollout', structured: 'alterations:execute', legacy: 'run:alterations' },
  { method: 'POST', path: '/alterations/p1/revert', structured: 'alterations:execute', legacy: 'run:alterations' },
  {
    method: 'POST',
    path: '/alterations/p1/retry-failed',
    structured: 'alterations:execute',
    legacy: 'run:alterations',
  },
  {
    method: 'GET',
    path: '/workflow-instances/i1/alterations',
    structured: 'workflows/instances:view',
    legacy: 'read:workflow-instances',
  },
  {
    method: 'GET',
    path: '/workflow-instances/incidents',
    structured: 'workflows/instances:view',
    legacy: 'read:workflow-instances',
  },
  {
    method: 'GET',
    path: '/workflow-definitions/d1/activity-counts',
    structured: 'workflows/instances:view',
    legacy: 'read:workflow-instances',
  },
  { method: 'GET', path: '/alterations/p1', structured: 'alterations:view', legacy: 'read:alterations' },
  { method: 'GET', path: '/alterations/p1/jobs', structured: 'alterations:view', legacy: 'read:alterations' },
  { method: 'GET', path: '/alterations/p1/events', structured: 'alterations:view', legacy: 'read:alterations' },
  { method: 'GET', path: '/alterations', structured: 'alterations:view', legacy: 'read:alterations' },
  { method: 'GET', path: '/alterations/p1/preview', structured: 'alterations:view', legacy: 'read:alterations' },
  { method: 'POST', path: '/alterations/p1/approve', structured: 'alterations:approve', legacy: '*' },
  { method: 'POST', path: '/alterations/p1/reject', structured: 'alterations:approve', legacy: '*' },
  { method: 'GET', path: '/alterations/policy', structured: 'alterations:view', legacy: 'read:alterations' },
  { method: 'PUT', path: '/alterations/policy', structured: 'alterations/policy:update', legacy: '*' },
  {
    method: 'GET',
    path: '/workflow-definitions/d1/migration-draft',
    structured: 'workflows/definitions:view',
    legacy: 'read:workflow-definitions',
  },
  { method: 'GET', path: '/connection-configuration', structured: 'connections:view', legacy: 'connections:read' },
  { method: 'GET', path: '/connection-configuration/c1', structured: 'connections:view', legacy: 'connections:read' },
  { method: 'POST', path: '/connection-configuration', structured: 'connections:create', legacy: 'connections:write' },
  {
    method: 'PUT',
    path: '/connection-configuration/c1',
    structured: 'connections:update',
    legacy: 'connections:write',
  },
  {
    method: 'DELETE',
    path: '/connection-configuration/c1',
    structured: 'connections:delete',
    legacy: 'connections:delete',
  },
  {
    method: 'GET',
    path: '/connection-configuration/descriptors',
    structured: 'signed-in',
    legacy: 'connections/descriptor:read',
  },
  {
    method: 'GET',
    path: '/connection-configuration/input-descriptor/Elsa.Connections.Http.HttpConnectionConfiguration',
    structured: 'signed-in',
    legacy: 'connections/descriptor:read',
  },
  {
    method: 'POST',
    path: '/workflow-definitions',
    structured: 'workflows/definitions:create',
    legacy: 'write:workflow-definitions',
  },
  {
    method: 'GET',
    path: '/workflow-definitions',
    structured: 'workflows/definitions:view',
    legacy: 'read:workflow-definitions',
  },
  {
    method: 'GET',
    path: '/workflow-definitions/d1',
    structured: 'workflows/definitions:view',
    legacy: 'read:workflow-definitions',
  },
  {
    method: 'POST',
    path: '/workflow-instances',
    structured: 'workflows/instances:execute',
    legacy: 'exec:workflow-definitions',
  },
  {
    method: 'POST',
    path: '/events/e1/trigger',
    structured: 'workflows/instances:execute',
    legacy: 'exec:workflow-definitions',
  },
  {
    method: 'GET',
    path: '/workflow-instances/i1',
    structured: 'workflows/instances:view',
    legacy: 'read:workflow-instances',
  },
  {
    method: 'GET',
    path: '/workflow-instances',
    structured: 'workflows/instances:view',
    legacy: 'read:workflow-instances',
  },
  { method: 'POST', path: '/identity/users', structured: 'identity/users:create', legacy: '*' },
  { method: 'POST', path: '/identity/roles', structured: 'identity/roles:create', legacy: '*' },
  { method: 'POST', path: '/identity/api-keys', structured: 'identity/api-keys:create', legacy: '*' },
  { method: 'DELETE', path: '/identity/users/u1', structured: 'identity/users:delete', legacy: '*' },
  { method: 'GET', path: '/identity/api-keys', structured: 'identity/api-keys:view', legacy: '*' },
  { method: 'GET', path: '/identity/users', structured: 'identity/users:view', legacy: '*' },
  { method: 'DELETE', path: '/identity/api-keys/k1', structured: 'identity/api-keys:delete', legacy: '*' },
  { method: 'GET', path: '/identity/permissions', structured: 'signed-in', legacy: 'signed-in' },
  { method: 'GET', path: '/audit', structured: 'audit:view', legacy: '*' },
  { method: 'GET', path: '/audit/verify', structured: 'audit:view', legacy: '*' },
  { method: 'POST', path: '/identity/secrets/hash', structured: 'identity/users:create', legacy: '*' },
  { method: 'POST', path: '/identity/logout', structured: 'signed-in', legacy: 'signed-in' },
  { method: 'GET', path: '/features/installed', structured: 'signed-in', legacy: 'signed-in' },
  { method: 'GET', path: '/resilience/strategies', structured: 'signed-in', legacy: 'signed-in' },
  { method: 'GET', path: '/descriptors/activities', structured: 'signed-in', legacy: 'signed-in' },
  {
    method: 'GET',
    path: '/descriptors/activities/Elsa.Http.SendHttpRequest/options/connection',
    structured: 'signed-in',
    legacy: 'signed-in',
  },
  { method: 'GET', path: '/metrics', structured: 'service/metrics:view', legacy: '*' },
  { method: 'GET', path: '/health', structured: 'public', legacy: 'public' },
  { method: 'GET', path: '/health/live', structured: 'public', legacy: 'public' },
  { method: 'GET', path: '/health/ready', structured: 'public', legacy: 'public' },
  { method: 'GET', path: '/openapi.json', structured: 'public', legacy: 'public' },
  { method: 'POST', path: '/identity/login', structured: 'public', legacy: 'public' },
  { method: 'POST', path: '/identity/refresh', structured: 'public', legacy: 'public' },
];

const LEGACY_OF: Record<string, string> = Object.fromEntries(ROUTES.map((r) => [r.structured, r.legacy]));

let structured: Harness;
let legacy: Harness;

const call = (h: Harness, r: { method: string; path: string }, key: string | null) =>
  h.request(r.method, r.path, { key, ...(['POST', 'PUT'].includes(r.method) ? { body: {} } : {}) });

/** Authorized means past the guard: anything but 401 and 403 (a 400, 404 or 2xx tells the guard let it in). */
const authorized = (status: number) => status !== 401 && status !== 403;

function wildcardsFor(permission: string): string[] {
  const i = permission.lastIndexOf(':');
  const resource = permission.slice(0, i);
  const verb = permission.slice(i + 1);
  return ['*', '*:*', `*:${verb}`, `${resource}:*`];
}

beforeAll(async () => {
  structured = await createHarness({ worker: false });
  legacy = await createHarness({ worker: false, permissionModel: 'legacy' });
});
afterAll(async () => {
  await structured?.close();
  await legacy?.close();
});

describe.each([['structured', () => structured, 'structured'] as const, ['legacy', () => legacy, 'legacy'] as const])(
  'every route in the %s model',
  (_name, harness, model) => {
    it('answers 401 without credentials, 403 naming the permission when it is missing, and lets the permission in', async () => {
      const h = harness();
      const unrelated = await h.keyWith(['unrelated:thing']);
      for (const r of ROUTES) {
        const required = r[model];
        const what = `${model} ${r.method} ${r.path}`;
        if (required === 'public') {
          // Reached without credentials (login and refresh then judge the body's credentials themselves).
          const open = await call(h, r, null);
          expect(open.status === 401 ? open.body.detail : 'ok', what).not.toMatch(/^No credentials/);
          continue;
        }
        const anonymous = await call(h, r, null);
        expect(anonymous.status, what).toBe(401);
        expect(anonymous.headers.get('www-authenticate'), what).toBeTruthy();
        const lacking = await call(h, r, unrelated);
        if (required === 'signed-in') {
          expect(authorized(lacking.status), what).toBe(true);
          continue;
        }
        expect(lacking.status, what).toBe(403);
        expect(lacking.body.detail, what).toContain(`"${required}"`);
        expect(authorized((await call(h, r, await h.keyWith([required]))).status), `${what} with ${required}`).toBe(
          true,
        );
        expect(authorized((await call(h, r, await h.keyWith(['*']))).status), `${what} with *`).toBe(true);
      }
    });
  },
);

describe('the structured model', () => {
  it('honours *:view, *:execute and {resource}:* where they apply', async () => {
    for (const r of ROUTES.filter((x) => x.structured.includes(':'))) {
      for (const grant of wildcardsFor(r.structured)) {
        const status = (await call(structured, r, await structured.keyWith([grant]))).status;
        expect(authorized(status), `${r.method} ${r.path} with ${grant}`).toBe(true);
      }
      // A wildcard of another verb does not.
      const otherVerb = r.structured.endsWith(':view') ? '*:execute' : '*:view';
      expect(
        (await call(structured, r, await structured.keyWith([otherVerb]))).status,
        `${r.method} ${r.path} with ${otherVerb}`,
      ).toBe(403);
    }
  });

  it('refuses the legacy strings alone', async () => {
    for (const r of ROUTES.filter(
      (x) => x.structured.includes(':') && x.legacy.includes(':') && x.legacy !== x.structured,
    )) {
      const status = (await call(structured, r, await structured.keyWith([LEGACY_OF[r.structured]!]))).status;
      expect(status, `${r.method} ${r.path} with ${r.legacy}`).toBe(403);
    }
  });
});

describe('the legacy model', () => {
  it('refuses the structured permissions', async () => {
    for (const r of ROUTES.filter((x) => x.legacy.includes(':') && x.legacy !== x.structured)) {
      expect(
        (await call(legacy, r, await legacy.keyWith([r.structured]))).status,
        `${r.method} ${r.path} with ${r.structured}`,
      ).toBe(403);
    }
  });

  it('needs * for identity administration', async () => {
    const key = await legacy.keyWith(['identity/users:create', 'run:alterations', 'read:alterations']);
    expect((await legacy.request('POST', '/identity/users', { key, body: {} })).status).toBe(403);
  });
});

describe('the table', () => {
  it('covers every operation of the OpenAPI document, with the permission it declares', async () => {
    const doc = (await structured.request('GET', '/openapi.json', { key: null })).body as {
      paths: Record<string, Record<string, { 'x-permission': unknown }>>;
    };
    const toRegex = (p: string) => new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const row = ROUTES.find((r) => r.method === method.toUpperCase() && toRegex(path).test(r.path));
        expect(row, `${method} ${path} is in the table`).toBeDefined();
        const declared = op['x-permission'];
        if (row!.structured !== 'public')
          expect(declared, `${method} ${path}`).toEqual({ structured: row!.structured, legacy: row!.legacy });
      }
    }
  });

  it('names only permissions that grant validation knows', () => {
    for (const r of ROUTES) {
      if (r.structured.includes(':'))
        expect(STRUCTURED_PERMISSIONS as readonly string[], r.structured).toContain(r.structured);
      if (r.legacy.includes(':')) expect(LEGACY_PERMISSIONS, r.legacy).toContain(r.legacy);
      for (const p of [r.structured, r.legacy].filter((x) => x.includes(':') || x === '*'))
        expect(isKnownGrant(p), p).toBe(true);
    }
  });
});
