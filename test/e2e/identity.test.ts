import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logStaleGrants } from '../../src/auth/stale-grants.js';
import { ensureAdminUser, verifySecret } from '../../src/auth/users.js';
import { createLogger } from '../../src/logger.js';
import { createHarness, type Harness } from '../support/harness.js';
import { Writable } from 'node:stream';

let h: Harness;
let offsetMs = 0;
const ADMIN_PASSWORD = 'admin-Password-123';

async function loginAs(username: string, password: string) {
  const r = await h.request('POST', '/identity/login', { key: null, body: { username, password } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { accessToken: string; refreshToken: string; tokenType: string; expiresIn: number };
}

const bearer = (token: string) => ({ key: null, headers: { authorization: `Bearer ${token}` } });
const refresh = (refreshToken: unknown) =>
  h.request('POST', '/identity/refresh', { key: null, body: { refreshToken } });

async function createUser(body: Record<string, unknown>) {
  const r = await h.request('POST', '/identity/users', { body: { password: 'pass-word-123', ...body } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; name: string };
}

beforeAll(async () => {
  h = await createHarness({ worker: false, clock: () => new Date(Date.now() + offsetMs) });
  await ensureAdminUser(h.pool, ADMIN_PASSWORD);
});
afterAll(() => h?.close());

describe('login and access tokens', () => {
  it('issues tokens with the contract claims and a 15-minute lifetime', async () => {
    const pair = await loginAs('admin', ADMIN_PASSWORD);
    expect(pair).toMatchObject({ tokenType: 'Bearer', expiresIn: 900 });
    const claims = decodeJwt(pair.accessToken);
    expect(claims).toMatchObject({
      sub: expect.any(String),
      name: 'admin',
      sid: expect.any(String),
      permissions: ['*'],
    });
    expect(claims).not.toHaveProperty('tenantId');
    expect(claims.exp! - claims.iat!).toBe(900);
    const r = await h.request('GET', '/features/installed', bearer(pair.accessToken));
    expect(r.status).toBe(200);
    expect((await h.request('GET', '/alterations', bearer(pair.accessToken))).status).toBe(200);
  });

  it('gives a user without grants ["none"], its tenant, and the catalogs only', async () => {
    await createUser({ name: 'nobody', tenantId: 'tenant-n' });
    const pair = await loginAs('nobody', 'pass-word-123');
    expect(decodeJwt(pair.accessToken)).toMatchObject({ permissions: ['none'], tenantId: 'tenant-n' });
    expect((await h.request('GET', '/resilience/strategies', bearer(pair.accessToken))).status).toBe(200);
    const denied = await h.request('GET', '/alterations', bearer(pair.accessToken));
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain('alterations:view');
  });

  it('computes effective grants from the user and its roles', async () => {
    expect(
      (
        await h.request('POST', '/identity/roles', {
          body: { name: 'viewers', permissions: ['alterations:view', '*:view'] },
        })
      ).status,
    ).toBe(201);
    await createUser({ name: 'mixed', roles: ['viewers'], permissions: ['alterations:execute'] });
    const claims = decodeJwt((await loginAs('mixed', 'pass-word-123')).accessToken);
    expect([...(claims.permissions as string[])].sort()).toEqual(['*:view', 'alterations:execute', 'alterations:view']);
  });

  it('refuses bad credentials with 401 and WWW-Authenticate', async () => {
    for (const body of [
      { username: 'admin', password: 'wrong-password' },
      { username: 'ghost', password: 'whatever-1' },
    ]) {
      const r = await h.request('POST', '/identity/login', { key: null, body });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toContain('Bearer');
      expect(r.body.detail).toBe('Unknown user name or wrong password');
    }
    const malformed = await h.request('GET', '/alterations', {
      key: null,
      headers: { authorization: 'Bearer not.a.jwt' },
    });
    expect(malformed.status).toBe(401);
  });

  it('expires access tokens after their lifetime', async () => {
    const pair = await loginAs('admin', ADMIN_PASSWORD);
    offsetMs = 901_000;
    try {
      const r = await h.request('GET', '/alterations', bearer(pair.accessToken));
      expect(r.status).toBe(401);
      expect(r.body.detail).toContain('expired');
    } finally {
      offsetMs = 0;
    }
  });
});

describe('refresh', () => {
  it('rotates the refresh token; reusing a rotated one revokes the session', async () => {
    const first = await loginAs('admin', ADMIN_PASSWORD);
    const second = await refresh(first.refreshToken);
    expect(second.status).toBe(200);
    expect(second.body.refreshToken).not.toBe(first.refreshToken);
    expect(decodeJwt(second.body.accessToken).sid).toBe(decodeJwt(first.accessToken).sid);
    const reused = await refresh(first.refreshToken);
    expect(reused.status).toBe(401);
    expect(reused.body.detail).toContain('already used');
    // The whole session is revoked: even the newest refresh token stops working.
    expect((await refresh(second.body.refreshToken)).status).toBe(401);
    // A detected theft ends the access tokens of the session at once too (a sign-out would not).
    const after = await h.request('GET', '/alterations', bearer(second.body.accessToken));
    expect(after.status).toBe(401);
    expect(after.body.detail).toContain('used twice');
  });

  it('is a 401 for blank, malformed, expired, unknown, subject-less, conflicting and unknown-subject tokens', async () => {
    const pair = await loginAs('admin', ADMIN_PASSWORD);
    const { sid, sub } = decodeJwt(pair.refreshToken) as { sid: string; sub: string };
    const sign = (claims: Record<string, unknown>, subject?: string, exp: string | number = '1h') => {
      let jwt = new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'rt+jwt' })
        .setIssuer('workflow-alterations')
        .setIssuedAt()
        .setExpirationTime(exp);
      if (subject !== undefined) jwt = jwt.setSubject(subject);
      return jwt.sign(h.tokens.key);
    };
    const other = await createUser({ name: 'other-user' });
    const cases: [string, unknown][] = [
      ['missing', undefined],
      ['blank', '   '],
      ['malformed', 'abc.def'],
      [
        'signed elsewhere',
        await new SignJWT({ sid })
          .setProtectedHeader({ alg: 'HS256', typ: 'rt+jwt' })
          .setSubject(sub)
          .setJti('x')
          .setIssuer('workflow-alterations')
          .setExpirationTime('1h')
          .sign(new TextEncoder().encode('another key')),
      ],
      ['an access token', pair.accessToken],
      ['unknown jti', await sign({ sid, jti: 'never-issued' }, sub)],
      ['no subject', await sign({ sid, jti: 'x' })],
      ['blank subject', await sign({ sid, jti: 'x' }, ' ')],
      ['conflicting subject', await sign({ sid, jti: 'x' }, other.id)],
      ['unknown subject and session', await sign({ sid: 'no-session', jti: 'x' }, 'ghost')],
      ['expired', await sign({ sid, jti: 'x' }, sub, Math.floor(Date.now() / 1000) - 10)],
    ];
    for (const [what, token] of cases) {
      const r = await h.request('POST', '/identity/refresh', {
        key: null,
        body: token === undefined ? {} : { refreshToken: token },
      });
      expect(r.status, what).toBe(401);
      expect(r.headers.get('content-type'), what).toContain('application/problem+json');
    }
    // None of that disturbed the real session.
    expect((await refresh(pair.refreshToken)).status).toBe(200);
  });

  it('shows a permission change at the next refresh', async () => {
    const user = await createUser({ name: 'promoted', permissions: ['alterations:view'] });
    const pair = await loginAs('promoted', 'pass-word-123');
    await h.pool.query("UPDATE users SET permissions = '{alterations:view,alterations:execute}' WHERE id = $1", [
      user.id,
    ]);
    expect(decodeJwt(pair.accessToken).permissions).toEqual(['alterations:view']);
    const next = await refresh(pair.refreshToken);
    expect(decodeJwt(next.body.accessToken).permissions).toEqual(['alterations:execute', 'alterations:view']);
  });
});

describe('logout and deletion', () => {
  it('ends refresh at once; the access token works until it expires', async () => {
    await createUser({ name: 'leaver', permissions: ['alterations:view'] });
    const pair = await loginAs('leaver', 'pass-word-123');
    const out = await h.request('POST', '/identity/logout', bearer(pair.accessToken));
    expect(out.status).toBe(204);
    expect((await refresh(pair.refreshToken)).status).toBe(401);
    expect((await h.request('GET', '/alterations', bearer(pair.accessToken))).status).toBe(200);
    offsetMs = 901_000;
    try {
      expect((await h.request('GET', '/alterations', bearer(pair.accessToken))).status).toBe(401);
    } finally {
      offsetMs = 0;
    }
    expect((await h.request('POST', '/identity/logout', { key: null })).status).toBe(401);
  });

  it("signs out the session of a refresh token given in the body, only if it is the caller's", async () => {
    const a = await loginAs('admin', ADMIN_PASSWORD);
    const b = await loginAs('admin', ADMIN_PASSWORD);
    expect(
      (
        await h.request('POST', '/identity/logout', {
          ...bearer(a.accessToken),
          body: { refreshToken: b.refreshToken },
        })
      ).status,
    ).toBe(204);
    expect((await refresh(b.refreshToken)).status).toBe(401);
    expect((await refresh(a.refreshToken)).status).toBe(200);
  });

  it('deleting a user ends its sessions and its access tokens', async () => {
    const user = await createUser({ name: 'doomed', permissions: ['alterations:view'] });
    const pair = await loginAs('doomed', 'pass-word-123');
    expect((await h.request('DELETE', `/identity/users/${user.id}`)).status).toBe(204);
    expect((await refresh(pair.refreshToken)).status).toBe(401);
    expect((await h.request('GET', '/alterations', bearer(pair.accessToken))).status).toBe(401);
    expect((await h.request('DELETE', `/identity/users/${user.id}`)).status).toBe(404);
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id]);
    expect(rows[0].n).toBe(0);
  });
});

describe('purging', () => {
  it('removes spent refresh tokens, ended sessions and old throttle rows, and keeps whatever can still matter', async () => {
    const live = await loginAs('admin', ADMIN_PASSWORD);
    const liveSid = decodeJwt(live.accessToken).sid as string;
    const { rows: admin } = await h.pool.query<{ id: string }>("SELECT id FROM users WHERE name = 'admin'");
    const userId = admin[0]!.id;
    await h.pool.query(
      `INSERT INTO sessions (id, user_id, tenant_id, created_at, revoked_at, revoked_reason) VALUES
         ('ended-long-ago', $1, '', now() - interval '30 days', now() - interval '1 day', 'signed out'),
         ('ended-just-now', $1, '', now() - interval '1 day', now(), 'signed out'),
         ('expired-tokens', $1, '', now() - interval '30 days', NULL, NULL)`,
      [userId],
    );
    await h.pool.query(
      `INSERT INTO refresh_tokens (jti, session_id, issued_at, expires_at, used_at) VALUES
         ('old-1', 'expired-tokens', now() - interval '30 days', now() - interval '16 days', now() - interval '20 days'),
         ('spent-live', 'ended-just-now', now() - interval '1 day', now() + interval '13 days', now())`,
    );
    await h.pool.query(
      `INSERT INTO auth_throttle (key, failures, window_start, block_seconds, blocked_until) VALUES
         ('addr:old', 3, now() - interval '2 hours', 0, NULL),
         ('addr:blocked-old', 30, now() - interval '2 hours', 900, now() + interval '5 minutes'),
         ('addr:recent', 3, now() - interval '1 minute', 0, NULL)`,
    );
    // Clients known for a user name (sign-ins from there spare them the user name's ceiling) for 30 days.
    await h.pool.query(
      `INSERT INTO auth_known_clients (user_name, client, succeeded_at) VALUES
         ('someone', '203.0.113.1', now() - interval '31 days'), ('someone', '203.0.113.2', now() - interval '29 days')`,
    );
    const { purgeSpentSessions } = await import('../../src/auth/tokens.js');
    const { purgeThrottle } = await import('../../src/auth/throttle.js');
    expect(await purgeThrottle(h.pool)).toBe(2);
    expect((await h.pool.query("SELECT client FROM auth_known_clients WHERE user_name = 'someone'")).rows).toEqual([
      { client: '203.0.113.2' },
    ]);
    expect(await purgeSpentSessions(h.pool, 900)).toBeGreaterThanOrEqual(3);
    const ids = async (sql: string) => (await h.pool.query<{ id: string }>(sql)).rows.map((r) => r.id).sort();
    const sessions = await ids(
      "SELECT id FROM sessions WHERE id IN ('ended-long-ago', 'ended-just-now', 'expired-tokens', '" + liveSid + "')",
    );
    expect(sessions).toEqual(['ended-just-now', liveSid].sort());
    expect(await ids("SELECT jti AS id FROM refresh_tokens WHERE jti IN ('old-1', 'spent-live')")).toEqual([
      'spent-live',
    ]);
    expect(
      await ids("SELECT key AS id FROM auth_throttle WHERE key IN ('addr:old', 'addr:blocked-old', 'addr:recent')"),
    ).toEqual(['addr:blocked-old', 'addr:recent']);
    // The live session still refreshes.
    expect((await refresh(live.refreshToken)).status).toBe(200);
  });
});

describe('users, roles and secrets', () => {
  it('validates and places users', async () => {
    const dup = await h.request('POST', '/identity/users', { body: { name: 'ADMIN', password: 'pass-word-123' } });
    expect(dup.status).toBe(409);
    const role = await h.request('POST', '/identity/users', {
      body: { name: 'r1', password: 'pass-word-123', roles: ['viewers', 'nope'] },
    });
    expect(role.status).toBe(400);
    expect(role.body.errors).toEqual([{ path: '/roles/1', message: 'No role named "nope" in this tenant' }]);
    const short = await h.request('POST', '/identity/users', { body: { name: 'r2', password: 'short' } });
    expect(short.status).toBe(400);
    expect(short.body.errors[0].path).toBe('/password');
    // "default" is how the default tenant reads in the Temporal UI and in wfa: no tenant may be named so.
    for (const [path, body] of [
      ['/identity/users', { name: 'r5', password: 'pass-word-123', tenantId: 'Default' }],
      ['/identity/api-keys', { name: 'k5', permissions: ['alterations:view'], tenantId: 'default' }],
    ] as const) {
      const named = await h.request('POST', path, { body });
      expect(named.status).toBe(400);
      expect(named.body.errors[0].path).toBe('/tenantId');
    }
    const tenantAdmin = await h.keyWith(['identity/users:create', 'alterations:view'], 'tenant-x');
    const elsewhere = await h.request('POST', '/identity/users', {
      key: tenantAdmin,
      body: { name: 'r3', password: 'pass-word-123', tenantId: 'tenant-y' },
    });
    expect(elsewhere.status).toBe(403);
    const escalate = await h.request('POST', '/identity/users', {
      key: tenantAdmin,
      body: { name: 'r4', password: 'pass-word-123', permissions: ['*'] },
    });
    expect(escalate.status).toBe(403);
    // A role hands out its grants: the caller must hold them too.
    const userAdmin = await h.keyWith(['identity/users:create']);
    const viaRole = await h.request('POST', '/identity/users', {
      key: userAdmin,
      body: { name: 'r6', password: 'pass-word-123', roles: ['viewers'] },
    });
    expect(viaRole.status).toBe(403);
    expect(viaRole.body.detail).toContain('you do not hold it yourself');
    const placed = await h.request('POST', '/identity/users', {
      key: tenantAdmin,
      body: { name: 'r5', password: 'pass-word-123', permissions: ['alterations:view'] },
    });
    expect(placed.body).toMatchObject({
      name: 'r5',
      tenantId: 'tenant-x',
      roles: [],
      permissions: ['alterations:view'],
    });
    expect((await h.request('POST', '/identity/roles', { body: { name: 'viewers', permissions: [] } })).status).toBe(
      409,
    );
  });

  it('hashes secrets with Argon2id', async () => {
    const r = await h.request('POST', '/identity/secrets/hash', { body: { secret: 's3cret-value' } });
    expect(r.status).toBe(200);
    expect(r.body.hash).toMatch(/^\$argon2id\$/);
    expect(await verifySecret(r.body.hash, 's3cret-value')).toBe(true);
    expect(await verifySecret(r.body.hash, 'other')).toBe(false);
    const { rows } = await h.pool.query("SELECT password_hash FROM users WHERE name = 'admin'");
    expect(rows[0].password_hash).toMatch(/^\$argon2id\$/);
  });

  it('keeps ADMIN_PASSWORD in force on later starts', async () => {
    await ensureAdminUser(h.pool, 'a-new-admin-password');
    expect(
      (await h.request('POST', '/identity/login', { key: null, body: { username: 'admin', password: ADMIN_PASSWORD } }))
        .status,
    ).toBe(401);
    await loginAs('admin', 'a-new-admin-password');
    await ensureAdminUser(h.pool, ADMIN_PASSWORD);
  });
});

describe('stale grants', () => {
  it('logs each stored grant that no longer resolves once, with its replacement or "removed"', async () => {
    await h.keyWith(['read:alterations', 'alterations:view']);
    await h.keyWith(['read:alterations', 'exec:csharp-expressions']);
    await h.request('POST', '/identity/roles', { body: { name: 'old-style', permissions: ['run:alterations'] } });
    await h.pool.query("UPDATE users SET permissions = permissions || '{manage:user-tasks}' WHERE name = 'r5'");
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _e, cb) {
        for (const l of chunk.toString().split('\n'))
          if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    await logStaleGrants(h.pool, createLogger('info', sink));
    const byGrant = new Map(lines.map((l) => [l.grant, l]));
    expect(lines).toHaveLength(byGrant.size);
    expect(byGrant.get('read:alterations')).toMatchObject({ level: 40, replacement: 'alterations:view' });
    expect((byGrant.get('read:alterations')!.holders as string[]).length).toBe(2);
    expect(byGrant.get('run:alterations')).toMatchObject({
      replacement: 'alterations:execute',
      holders: ['role:old-style'],
    });
    expect(byGrant.get('manage:user-tasks')).toMatchObject({
      replacement: 'user-tasks:supervise',
      holders: ['user:r5'],
    });
    expect(byGrant.get('exec:csharp-expressions')).toMatchObject({ replacement: 'removed' });
    expect(byGrant.get('exec:csharp-expressions')!.msg).toBe(
      'stored permission "exec:csharp-expressions" no longer resolves; it was removed',
    );
    expect(byGrant.has('alterations:view')).toBe(false);
    expect(byGrant.has('*')).toBe(false);
  });
});
