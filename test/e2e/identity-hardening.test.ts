import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { ensureAdminUser } from '../../src/auth/users.js';
import { createHarness, type Harness } from '../support/harness.js';

/** Section 2 (changed) and section 8 of the contract: delegation across tenants, keys, bootstrap, guessing. */
let h: Harness;

beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(() => h?.close());
// Throttling state is per user name and client address; each test starts from none.
beforeEach(async () => {
  await h.pool.query('DELETE FROM auth_throttle');
});

const user = (name: string, extra: Record<string, unknown> = {}, key?: string) =>
  h.request('POST', '/identity/users', {
    body: { name, password: 'correct horse battery', ...extra },
    ...(key ? { key } : {}),
  });

describe('placing a principal in another tenant', () => {
  it('needs *: delegating connections:view never becomes connections:view in another tenant', async () => {
    const delegator = await h.keyWith(['identity/api-keys:create', 'identity/users:create', 'connections:view']);
    const key = await h.request('POST', '/identity/api-keys', {
      key: delegator,
      body: { name: 'x', permissions: ['connections:view'], tenantId: 'tA' },
    });
    expect(key.status).toBe(403);
    expect(key.body.detail).toContain('"*"');
    const u = await user('tenant-hopper', { permissions: ['connections:view'], tenantId: 'tA' }, delegator);
    expect(u.status).toBe(403);
    expect(u.body.detail).toContain('"*"');
    // In its own tenant it still may.
    expect(
      (
        await h.request('POST', '/identity/api-keys', {
          key: delegator,
          body: { name: 'own', permissions: ['connections:view'] },
        })
      ).status,
    ).toBe(201);
  });

  it('is allowed to the operator (a default-tenant principal with *)', async () => {
    const r = await h.request('POST', '/identity/api-keys', {
      body: { name: 'tA key', permissions: ['connections:view'], tenantId: 'tA' },
    });
    expect(r.status).toBe(201);
    expect(r.body.tenantId).toBe('tA');
  });

  it("is refused to a tenant's *: it administers its own tenant only", async () => {
    const tenantRoot = await h.keyWith(['*'], 'tRoot');
    // Into another tenant, the default tenant (null and ''), or the tenant-agnostic `*`: 403 naming "*".
    for (const tenantId of ['tOther', null, '', '*']) {
      const key = await h.request('POST', '/identity/api-keys', {
        key: tenantRoot,
        body: { name: 'escape', permissions: ['*'], tenantId },
      });
      expect(key.status, `key into ${JSON.stringify(tenantId)}`).toBe(403);
      expect(key.body.detail).toContain('"*"');
      const u = await user(`escape-${String(tenantId)}`, { permissions: ['*'], tenantId }, tenantRoot);
      expect(u.status, `user into ${JSON.stringify(tenantId)}`).toBe(403);
    }
    const { rowCount } = await h.pool.query("SELECT 1 FROM api_keys WHERE name = 'escape'");
    expect(rowCount).toBe(0);
    // Its own tenant, named or not, works.
    const own = await h.request('POST', '/identity/api-keys', {
      key: tenantRoot,
      body: { name: 'own', permissions: ['*'], tenantId: 'tRoot' },
    });
    expect(own.status).toBe(201);
    expect(own.body.tenantId).toBe('tRoot');
  });

  it("never reaches another tenant's principals: the bootstrap admin and other keys are 404 to a tenant's *", async () => {
    await ensureAdminUser(h.pool, 'bootstrap password');
    onTestFinished(async () => {
      await h.pool.query("DELETE FROM users WHERE name = 'admin'");
    });
    const { rows } = await h.pool.query<{ id: string }>("SELECT id FROM users WHERE name = 'admin'");
    const otherKey = await h.request('POST', '/identity/api-keys', {
      body: { name: 'default-tenant key', permissions: ['alterations:view'] },
    });
    const tenantRoot = await h.keyWith(['*'], 'tRoot2');
    expect((await h.request('DELETE', `/identity/users/${rows[0]!.id}`, { key: tenantRoot })).status).toBe(404);
    expect((await h.request('DELETE', `/identity/api-keys/${otherKey.body.id}`, { key: tenantRoot })).status).toBe(404);
    const listed = await h.request('GET', '/identity/api-keys?tenantId=', { key: tenantRoot });
    expect(listed.status).toBe(403);
    expect(listed.body.detail).toContain('"*"');
    expect((await h.request('GET', '/alterations', { key: otherKey.body.key })).status).toBe(200);
    expect(
      (
        await h.request('POST', '/identity/login', {
          key: null,
          body: { username: 'admin', password: 'bootstrap password' },
        })
      ).status,
    ).toBe(200);
  });
});

describe('the operator', () => {
  it("lists, revokes and deletes any tenant's keys and users", async () => {
    const key = await h.request('POST', '/identity/api-keys', {
      body: { name: 'tE key', permissions: ['alterations:view'], tenantId: 'tE' },
    });
    const member = await user('te-member', { permissions: ['alterations:view'], tenantId: 'tE' });
    expect(member.status).toBe(201);

    const list = await h.request('GET', '/identity/api-keys?tenantId=tE');
    expect(list.status).toBe(200);
    expect(list.body.items.map((k: { id: string }) => k.id)).toEqual([key.body.id]);
    expect(list.body.items[0].tenantId).toBe('tE');
    // Its own tenant by default, and by an empty tenantId.
    const own = await h.request('GET', '/identity/api-keys?tenantId=');
    expect(own.body.items.every((k: { tenantId: string | null }) => k.tenantId === null)).toBe(true);

    expect((await h.request('DELETE', `/identity/api-keys/${key.body.id}`)).status).toBe(204);
    expect((await h.request('GET', '/alterations', { key: key.body.key })).status).toBe(401);
    expect((await h.request('DELETE', `/identity/users/${member.body.id}`)).status).toBe(204);
    const { rowCount } = await h.pool.query('SELECT 1 FROM users WHERE id = $1', [member.body.id]);
    expect(rowCount).toBe(0);
  });

  it("is not a tenant's administrator listing its own tenant", async () => {
    const tenantAdmin = await h.keyWith(['identity/api-keys:view'], 'tF');
    expect((await h.request('GET', '/identity/api-keys?tenantId=tF', { key: tenantAdmin })).status).toBe(200);
    const other = await h.request('GET', '/identity/api-keys?tenantId=tG', { key: tenantAdmin });
    expect(other.status).toBe(403);
    // A default-tenant principal without * is no operator either.
    const plain = await h.keyWith(['identity/api-keys:view', 'identity/api-keys:create']);
    expect((await h.request('GET', '/identity/api-keys?tenantId=tF', { key: plain })).status).toBe(403);
  });
});

describe('deleting a user', () => {
  it('needs every grant the user holds: identity/users:delete alone cannot delete an administrator', async () => {
    const admin = await user('almighty', { permissions: ['*'] });
    expect(admin.status).toBe(201);
    const deleter = await h.keyWith(['identity/users:delete']);
    const r = await h.request('DELETE', `/identity/users/${admin.body.id}`, { key: deleter });
    expect(r.status).toBe(403);
    expect(r.body.detail).toContain('"*"');
    const { rowCount } = await h.pool.query('SELECT 1 FROM users WHERE id = $1', [admin.body.id]);
    expect(rowCount).toBe(1);
    const plain = await user('plain-user', { permissions: [] });
    expect((await h.request('DELETE', `/identity/users/${plain.body.id}`, { key: deleter })).status).toBe(204);
  });

  it("counts the grants of the user's roles", async () => {
    expect(
      (await h.request('POST', '/identity/roles', { body: { name: 'planners', permissions: ['alterations:execute'] } }))
        .status,
    ).toBe(201);
    const member = await user('planner', { roles: ['planners'] });
    const deleter = await h.keyWith(['identity/users:delete']);
    expect((await h.request('DELETE', `/identity/users/${member.body.id}`, { key: deleter })).status).toBe(403);
    const able = await h.keyWith(['identity/users:delete', 'alterations:*']);
    expect((await h.request('DELETE', `/identity/users/${member.body.id}`, { key: able })).status).toBe(204);
  });
});

describe('the bootstrap administrator', () => {
  it('refuses to make another tenant\'s "Admin" the administrator, and leaves it unchanged', async () => {
    // As if created before the name was reserved.
    await h.pool.query(
      "INSERT INTO users (id, tenant_id, name, password_hash, permissions) VALUES ('tb-admin', 'tB', 'Admin', 'x', '{}')",
    );
    try {
      await expect(ensureAdminUser(h.pool, 'the admin password')).rejects.toThrow(
        /belongs to tenant "tB".*not made the administrator/,
      );
      const { rows } = await h.pool.query("SELECT password_hash, permissions FROM users WHERE id = 'tb-admin'");
      expect(rows[0]).toEqual({ password_hash: 'x', permissions: [] });
    } finally {
      await h.pool.query("DELETE FROM users WHERE id = 'tb-admin'");
    }
  });

  it('reserves the name admin for the default tenant', async () => {
    const r = await user('ADMIN', { tenantId: 'tB' });
    expect(r.status).toBe(409);
    expect(r.body.detail).toMatch(/reserved/);
  });
});

describe('user names', () => {
  it('refuse look-alikes: mixed scripts, invisible characters, other spaces and compatibility forms', async () => {
    for (const name of [
      '\u0430dmin',
      'admin\u200b',
      'ad\u00admin',
      'ａｄｍｉｎ',
      'ad\u00a0min',
      'pay\u0440al',
      'bob\u0007',
    ]) {
      const r = await user(name, { tenantId: 'tLook' });
      expect(r.status, JSON.stringify(name)).toBe(400);
      expect(r.body.errors[0].path).toBe('/name');
    }
    for (const name of ['José García', 'иван', 'Ωμέγα-ομάδα', 'ops.user+1@example.com']) {
      expect((await user(name, { tenantId: 'tLook' })).status, name).toBe(201);
    }
  });
});

describe('API keys', () => {
  it('are listed without the key or its hash, show when they were last used, and can be revoked at once', async () => {
    const created = await h.request('POST', '/identity/api-keys', {
      body: { name: 'listed', permissions: ['alterations:view'] },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect((await h.request('GET', '/alterations', { key: created.body.key })).status).toBe(200);

    const list = await h.request('GET', '/identity/api-keys');
    expect(list.status).toBe(200);
    const item = list.body.items.find((k: { id: string }) => k.id === created.body.id);
    expect(Object.keys(item).sort()).toEqual([
      'createdAt',
      'createdBy',
      'expiresAt',
      'id',
      'lastUsedAt',
      'name',
      'permissions',
      'tenantId',
    ]);
    expect(item.lastUsedAt).not.toBeNull();
    expect(JSON.stringify(list.body)).not.toContain(created.body.key);
    const { rows } = await h.pool.query('SELECT key_hash FROM api_keys WHERE id = $1', [created.body.id]);
    expect(JSON.stringify(list.body)).not.toContain(rows[0].key_hash);
    expect(list.body.totalCount).toBe(list.body.items.length);

    expect((await h.request('DELETE', `/identity/api-keys/${created.body.id}`)).status).toBe(204);
    expect((await h.request('GET', '/alterations', { key: created.body.key })).status).toBe(401);
    expect((await h.request('DELETE', `/identity/api-keys/${created.body.id}`)).status).toBe(404);
  });

  it("are listed and revoked only within the caller's tenant", async () => {
    const other = await h.request('POST', '/identity/api-keys', {
      body: { name: 'other tenant', permissions: ['alterations:view'], tenantId: 'tC' },
    });
    const tenantAdmin = await h.keyWith(['identity/api-keys:view', 'identity/api-keys:delete'], 'tD');
    const list = await h.request('GET', '/identity/api-keys', { key: tenantAdmin });
    expect(list.body.items.map((k: { tenantId: string }) => k.tenantId)).toEqual(['tD']);
    expect((await h.request('DELETE', `/identity/api-keys/${other.body.id}`, { key: tenantAdmin })).status).toBe(404);
  });

  it('stop working when they expire, and must expire in the future', async () => {
    const created = await h.request('POST', '/identity/api-keys', {
      body: {
        name: 'short-lived',
        permissions: ['alterations:view'],
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    expect(created.status).toBe(201);
    expect(created.body.expiresAt).not.toBeNull();
    expect((await h.request('GET', '/alterations', { key: created.body.key })).status).toBe(200);
    await h.pool.query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [created.body.id]);
    expect((await h.request('GET', '/alterations', { key: created.body.key })).status).toBe(401);
    const past = await h.request('POST', '/identity/api-keys', {
      body: { name: 'past', permissions: [], expiresAt: '2020-01-01T00:00:00Z' },
    });
    expect(past.status).toBe(400);
    expect(past.body.errors[0].path).toBe('/expiresAt');
  });
});

describe('grants', () => {
  it('refuses a permission of neither model, naming it', async () => {
    for (const [path, body] of [
      ['/identity/api-keys', { name: 'typo', permissions: ['alterations:view', 'workflows:read'] }],
      ['/identity/users', { name: 'typo-user', password: 'correct horse battery', permissions: ['workflows:read'] }],
      ['/identity/roles', { name: 'typo-role', permissions: ['workflows:read'] }],
    ] as const) {
      const r = await h.request('POST', path, { body });
      expect(r.status, path).toBe(400);
      expect(r.body.errors[0].path, path).toBe(`/permissions/${body.permissions.indexOf('workflows:read')}`);
      expect(r.body.errors[0].message, path).toContain('workflows:read');
    }
    expect(
      (await h.request('POST', '/identity/api-keys', { body: { name: 'bad wildcard', permissions: ['nothing:*'] } }))
        .status,
    ).toBe(400);
  });

  it('accepts both models and the wildcard forms', async () => {
    const r = await h.request('POST', '/identity/api-keys', {
      body: {
        name: 'wild',
        permissions: [
          '*',
          '*:view',
          'alterations:*',
          'read:alterations',
          'workflows/instances:view',
          'connections/descriptor:read',
        ],
      },
    });
    expect(r.status).toBe(201);
    const list = await h.request('GET', '/identity/permissions');
    expect(list.status).toBe(200);
    expect(list.body.structured).toContain('alterations:execute');
    expect(list.body.legacy).toContain('run:alterations');
  });
});

describe('guessing', () => {
  it('blocks a user name after 5 failed sign-ins with 429 and Retry-After, even for the right password', async () => {
    expect((await user('guessed', { permissions: [] })).status).toBe(201);
    const login = (password: string) =>
      h.request('POST', '/identity/login', { key: null, body: { username: 'guessed', password } });
    for (let i = 0; i < 5; i++) expect((await login(`wrong ${i}`)).status).toBe(401);
    const blocked = await login('correct horse battery');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked.headers.get('content-type')).toBe('application/problem+json');
  });

  it('clears the count of a user name on a successful sign-in, and marks tokens no-store', async () => {
    expect((await user('forgetful', { permissions: [] })).status).toBe(201);
    const login = (password: string) =>
      h.request('POST', '/identity/login', { key: null, body: { username: 'forgetful', password } });
    for (let i = 0; i < 4; i++) expect((await login('wrong')).status).toBe(401);
    const ok = await login('correct horse battery');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    const refreshed = await h.request('POST', '/identity/refresh', {
      key: null,
      body: { refreshToken: ok.body.refreshToken },
    });
    expect(refreshed.headers.get('cache-control')).toBe('no-store');
    for (let i = 0; i < 4; i++) expect((await login('wrong')).status).toBe(401);
    expect((await login('correct horse battery')).status).toBe(200);
  });

  it('blocks a client address after 20 unknown API keys, while valid keys keep working', async () => {
    for (let i = 0; i < 20; i++)
      expect((await h.request('GET', '/alterations', { key: `wfa_guess_${i}` })).status).toBe(401);
    const blocked = await h.request('GET', '/alterations', { key: 'wfa_guess_21' });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await h.request('GET', '/alterations')).status).toBe(200);
    // The state is a row in Postgres, shared by every API node: the 21st attempt was counted, and refused.
    const { rows } = await h.pool.query("SELECT failures FROM auth_throttle WHERE key = 'addr:in-process'");
    expect(rows[0].failures).toBe(21);
  });
});
