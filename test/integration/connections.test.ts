import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { createConfigCipher } from '../../src/connections/cipher.js';
import { checkEncryptionKey } from '../../src/connections/repository.js';
import { CONNECTION_TYPES } from '../../src/connections/types.js';
import { createHarness, type Harness } from '../support/harness.js';

const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
const SMTP = 'Elsa.Connections.Smtp.SmtpConnectionConfiguration';
const KEY = 'correct horse battery staple, 32+ characters of secret';

let h: Harness;
let enc: Harness;

const http = (name: string, configuration: Record<string, unknown> = {}) => ({
  name,
  description: `${name} API`,
  connectionType: HTTP,
  connectionConfiguration: {
    baseUrl: 'https://api.example.com/v1',
    headers: { 'x-api-key': 'k-123' },
    bearerToken: 'secret-token',
    ...configuration,
  },
});

beforeAll(async () => {
  h = await createHarness({ worker: false });
  enc = await createHarness({ worker: false, encryptionKey: KEY });
});
afterAll(async () => {
  await h?.close();
  await enc?.close();
});

describe('connection CRUD', () => {
  it('creates, reads, lists, updates and deletes', async () => {
    const created = await h.request('POST', '/connection-configuration', { body: http('orders') });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(created.headers.get('location')).toBe(`/connection-configuration/${id}`);
    expect(created.body).toEqual({
      id,
      tenantId: null,
      name: 'orders',
      description: 'orders API',
      connectionType: HTTP,
      // Stored as the type reads it: defaults filled in.
      connectionConfiguration: {
        baseUrl: 'https://api.example.com/v1',
        headers: { 'x-api-key': 'k-123' },
        bearerToken: 'secret-token',
        timeoutMs: 10000,
      },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect((await h.request('GET', `/connection-configuration/${id}`)).body).toEqual(created.body);

    await h.request('POST', '/connection-configuration', {
      body: {
        name: 'mail',
        connectionType: SMTP,
        connectionConfiguration: { host: 'smtp.example.com', fromAddress: 'no-reply@example.com' },
      },
    });
    const all = await h.request('GET', '/connection-configuration');
    expect(all.body.totalCount).toBe(2);
    expect(all.body.items.map((c: { name: string }) => c.name)).toEqual(['mail', 'orders']);
    const onlyHttp = await h.request('GET', `/connection-configuration?connectionType=${HTTP}`);
    expect(onlyHttp.body.items.map((c: { name: string }) => c.name)).toEqual(['orders']);
    const paged = await h.request('GET', '/connection-configuration?skip=1&take=1');
    expect(paged.body).toMatchObject({ totalCount: 2, items: [{ name: 'orders' }] });

    const updated = await h.request('PUT', `/connection-configuration/${id}`, {
      body: http('orders-v2', { timeoutMs: 500 }),
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ id, name: 'orders-v2', connectionConfiguration: { timeoutMs: 500 } });
    expect(Date.parse(updated.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.body.updatedAt));

    expect((await h.request('DELETE', `/connection-configuration/${id}`)).status).toBe(204);
    expect((await h.request('GET', `/connection-configuration/${id}`)).status).toBe(404);
    expect((await h.request('DELETE', `/connection-configuration/${id}`)).status).toBe(404);
    expect((await h.request('PUT', `/connection-configuration/${id}`, { body: http('x') })).status).toBe(404);
  });

  it('rejects a blank name, an unknown type and a configuration the type refuses, naming each path', async () => {
    const cases: [unknown, string[]][] = [
      [http('   '), ['/name']],
      [{ ...http('a'), connectionType: 'Elsa.Connections.Nope' }, ['/connectionType']],
      [{ ...http('a'), connectionType: HTTP.toLowerCase() }, ['/connectionType']],
      [http('a', { baseUrl: 'not a url' }), ['/connectionConfiguration/baseUrl']],
      [http('a', { baseUrl: 'ftp://files.example.com' }), ['/connectionConfiguration/baseUrl']],
      [
        http('a', { headers: { 'x-n': 1 }, timeoutMs: -5 }),
        ['/connectionConfiguration/headers/x-n', '/connectionConfiguration/timeoutMs'],
      ],
      [http('a', { proxy: 'x' }), ['/connectionConfiguration/proxy']],
      [
        { name: 'm', connectionType: SMTP, connectionConfiguration: { host: 'h', fromAddress: 'nope', port: 70000 } },
        ['/connectionConfiguration/fromAddress', '/connectionConfiguration/port'],
      ],
      [{ name: 'a', connectionType: HTTP }, ['/connectionConfiguration']],
      [{ ...http('a'), tenantId: '*' }, ['/tenantId']],
    ];
    for (const [body, paths] of cases) {
      const r = await h.request('POST', '/connection-configuration', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body.errors.map((e: { path: string }) => e.path).sort(), JSON.stringify(body)).toEqual(
        [...paths].sort(),
      );
    }
    const { rows } = await h.pool.query(
      "SELECT count(*)::int AS n FROM connection_configurations WHERE name IN ('a', 'm', '   ')",
    );
    expect(rows[0].n).toBe(0);
  });

  it('gives 409 for a name clash on create and on update, and exactly one row under concurrent creates', async () => {
    expect((await h.request('POST', '/connection-configuration', { body: http('billing') })).status).toBe(201);
    const dup = await h.request('POST', '/connection-configuration', { body: http('billing') });
    expect(dup.status).toBe(409);
    expect(dup.body.detail).toBe('A connection named "billing" already exists');
    const other = await h.request('POST', '/connection-configuration', { body: http('shipping') });
    const rename = await h.request('PUT', `/connection-configuration/${other.body.id}`, { body: http('billing') });
    expect(rename.status).toBe(409);
    expect(rename.body.detail).toBe('A connection named "billing" already exists');

    const results = await Promise.all(
      Array.from({ length: 8 }, () => h.request('POST', '/connection-configuration', { body: http('race') })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    const { rows } = await h.pool.query("SELECT count(*)::int AS n FROM connection_configurations WHERE name = 'race'");
    expect(rows[0].n).toBe(1);
  });
});

describe('tenancy', () => {
  it("keeps tenants apart while every tenant sees the '*' connections", async () => {
    const a = await h.keyWith(['connections:*'], 'tenant-a');
    const b = await h.keyWith(['connections:*'], 'tenant-b');
    const shared = await h.keyWith(['connections:*'], '*');
    const mineA = await h.request('POST', '/connection-configuration', { key: a, body: http('crm') });
    expect(mineA.body.tenantId).toBe('tenant-a');
    // The same name in another tenant is no clash.
    expect((await h.request('POST', '/connection-configuration', { key: b, body: http('crm') })).status).toBe(201);
    const common = await h.request('POST', '/connection-configuration', { key: shared, body: http('common') });
    expect(common.body.tenantId).toBe('*');

    const listA = await h.request('GET', '/connection-configuration', { key: a });
    expect(listA.body.items.map((c: { name: string; tenantId: string }) => `${c.tenantId}/${c.name}`)).toEqual([
      '*/common',
      'tenant-a/crm',
    ]);
    expect((await h.request('GET', `/connection-configuration/${mineA.body.id}`, { key: b })).status).toBe(404);
    expect(
      (await h.request('PUT', `/connection-configuration/${mineA.body.id}`, { key: b, body: http('crm') })).status,
    ).toBe(404);
    expect((await h.request('DELETE', `/connection-configuration/${mineA.body.id}`, { key: b })).status).toBe(404);
    expect((await h.request('GET', `/connection-configuration/${common.body.id}`, { key: b })).status).toBe(200);
    // A shared connection is changed only by a principal of tenant "*".
    const change = await h.request('DELETE', `/connection-configuration/${common.body.id}`, { key: a });
    expect(change.status).toBe(403);
    expect(
      (
        await h.request('PUT', `/connection-configuration/${common.body.id}`, {
          key: shared,
          body: http('common', { timeoutMs: 1 }),
        })
      ).status,
    ).toBe(200);
  });
});

describe('permissions', () => {
  it('grants view, create, update and delete separately', async () => {
    const target = (await h.request('POST', '/connection-configuration', { body: http('guarded') })).body.id as string;
    const cases: [string, string, string, unknown?][] = [
      ['connections:view', 'POST', '/connection-configuration', http('v')],
      ['connections:create', 'DELETE', `/connection-configuration/${target}`],
      ['connections:create', 'GET', `/connection-configuration/${target}`],
      ['connections:create', 'PUT', `/connection-configuration/${target}`, http('guarded')],
      ['connections:update', 'DELETE', `/connection-configuration/${target}`],
      ['connections:delete', 'GET', '/connection-configuration'],
      ['connections:read', 'GET', '/connection-configuration'],
      ['connections:write', 'POST', '/connection-configuration', http('w')],
    ];
    for (const [grant, method, path, body] of cases) {
      const r = await h.request(method, path, { key: await h.keyWith([grant]), ...(body ? { body } : {}) });
      expect(r.status, `${grant} ${method} ${path}`).toBe(403);
    }
    const allowed: [string, string, string, unknown?][] = [
      ['connections:view', 'GET', `/connection-configuration/${target}`],
      ['connections:update', 'PUT', `/connection-configuration/${target}`, http('guarded')],
      ['connections:create', 'POST', '/connection-configuration', http('created-by-grant')],
      ['*:view', 'GET', '/connection-configuration'],
      ['connections:delete', 'DELETE', `/connection-configuration/${target}`],
    ];
    for (const [grant, method, path, body] of allowed) {
      const r = await h.request(method, path, { key: await h.keyWith([grant]), ...(body ? { body } : {}) });
      expect(r.status, `${grant} ${method} ${path}`).toBeLessThan(300);
    }
    expect((await h.request('GET', '/connection-configuration', { key: null })).status).toBe(401);
    const forbidden = await h.request('POST', '/connection-configuration', {
      key: await h.keyWith(['connections:view']),
      body: http('z'),
    });
    expect(forbidden.body.detail).toContain('connections:create');
  });

  it('lets any signed-in principal read the descriptors', async () => {
    const nobody = await h.keyWith([]);
    expect((await h.request('GET', '/connection-configuration/descriptors', { key: nobody })).status).toBe(200);
    expect((await h.request('GET', `/connection-configuration/input-descriptor/${HTTP}`, { key: nobody })).status).toBe(
      200,
    );
    expect((await h.request('GET', '/connection-configuration/descriptors', { key: null })).status).toBe(401);
  });
});

describe('descriptors', () => {
  it('lists the registered types and derives input descriptors from their schemas', async () => {
    const list = await h.request('GET', '/connection-configuration/descriptors');
    expect(list.body.totalCount).toBe(CONNECTION_TYPES.length);
    expect(list.body.items).toContainEqual({
      type: HTTP,
      namespace: 'Elsa.Connections.Http',
      displayName: 'HTTP connection',
      description: expect.any(String),
    });
    const inputs = await h.request('GET', `/connection-configuration/input-descriptor/${HTTP}`);
    expect(inputs.body.totalCount).toBe(4);
    expect(inputs.body.items).toEqual([
      {
        name: 'baseUrl',
        typeName: 'String',
        displayName: 'Base URL',
        description: expect.any(String),
        uiHint: 'singleline',
        isRequired: true,
        isSensitive: false,
        defaultValue: null,
        order: 0,
      },
      {
        name: 'headers',
        typeName: 'Object',
        displayName: 'Headers',
        description: expect.any(String),
        uiHint: 'dictionary',
        isRequired: false,
        isSensitive: false,
        defaultValue: {},
        order: 1,
      },
      {
        name: 'bearerToken',
        typeName: 'String',
        displayName: 'Bearer token',
        description: expect.any(String),
        uiHint: 'password',
        isRequired: false,
        isSensitive: true,
        defaultValue: null,
        order: 2,
      },
      {
        name: 'timeoutMs',
        typeName: 'Int32',
        displayName: 'Timeout (ms)',
        description: expect.any(String),
        uiHint: 'singleline',
        isRequired: false,
        isSensitive: false,
        defaultValue: 10000,
        order: 3,
      },
    ]);
    // Every registered schema's fields, and nothing else, are described.
    for (const t of CONNECTION_TYPES) {
      const r = await h.request('GET', `/connection-configuration/input-descriptor/${t.type}`);
      expect(r.body.items.map((i: { name: string }) => i.name)).toEqual(Object.keys(t.schema.shape));
      const required = Object.entries(t.schema.shape)
        .filter(([, s]) => !(s as z.ZodType).safeParse(undefined).success)
        .map(([k]) => k);
      expect(
        r.body.items.filter((i: { isRequired: boolean }) => i.isRequired).map((i: { name: string }) => i.name),
      ).toEqual(required);
    }
    const smtp = await h.request('GET', `/connection-configuration/input-descriptor/${SMTP}`);
    expect(smtp.body.items.find((i: { name: string }) => i.name === 'security')).toMatchObject({
      uiHint: 'dropdown',
      defaultValue: 'StartTls',
      options: [
        { text: 'None', value: 'None' },
        { text: 'StartTls', value: 'StartTls' },
        { text: 'Tls', value: 'Tls' },
      ],
    });
    expect(
      (await h.request('GET', '/connection-configuration/input-descriptor/Elsa.Http.SendHttpRequest')).status,
    ).toBe(404);
  });

  it("lists the tenant's connection names for an activity's connection input", async () => {
    const key = await h.keyWith(['connections:*'], 'tenant-opt');
    await h.request('POST', '/connection-configuration', { key, body: http('zeta') });
    await h.request('POST', '/connection-configuration', { key, body: http('alpha') });
    await h.request('POST', '/connection-configuration', {
      key,
      body: {
        name: 'mailer',
        connectionType: SMTP,
        connectionConfiguration: { host: 'h', fromAddress: 'a@b.example' },
      },
    });
    const r = await h.request('GET', '/descriptors/activities/Elsa.Http.SendHttpRequest/options/connection', { key });
    expect(r.status).toBe(200);
    const names = r.body.items.map((i: { value: string }) => i.value);
    expect(names).toContain('alpha');
    expect(names).not.toContain('mailer');
    expect(names.indexOf('alpha')).toBeLessThan(names.indexOf('zeta'));
    expect(r.body.refresh).toBe(true);
    expect(
      (await h.request('GET', '/descriptors/activities/Elsa.Http.SendHttpRequest/options/path', { key })).status,
    ).toBe(404);
    expect((await h.request('GET', '/descriptors/activities/Elsa.Nope/options/connection', { key })).status).toBe(404);
  });
});

describe('encryption at rest', () => {
  it('stores no plaintext and still returns the full configuration', async () => {
    const created = await enc.request('POST', '/connection-configuration', {
      body: http('vault', { bearerToken: 'tok-PLAINTEXT-MARKER' }),
    });
    expect(created.status).toBe(201);
    const { rows } = await enc.pool.query(
      "SELECT configuration, configuration_encrypted, encode(configuration_encrypted, 'escape') AS raw FROM connection_configurations WHERE id = $1",
      [created.body.id],
    );
    expect(rows[0].configuration).toBeNull();
    expect(rows[0].configuration_encrypted.length).toBeGreaterThan(30);
    expect(rows[0].raw).not.toContain('PLAINTEXT-MARKER');
    expect(rows[0].raw).not.toContain('api.example.com');
    const read = await enc.request('GET', `/connection-configuration/${created.body.id}`);
    expect(read.body.connectionConfiguration).toEqual({
      ...http('').connectionConfiguration,
      bearerToken: 'tok-PLAINTEXT-MARKER',
      timeoutMs: 10000,
    });
    const listed = await enc.request('GET', '/connection-configuration');
    expect(listed.body.items[0].connectionConfiguration.bearerToken).toBe('tok-PLAINTEXT-MARKER');
  });

  it('refuses to start with a wrong or missing key, and never returns garbage', async () => {
    await expect(checkEncryptionKey(enc.pool, createConfigCipher(KEY))).resolves.toBeUndefined();
    await expect(checkEncryptionKey(enc.pool, createConfigCipher('a different key entirely'))).rejects.toThrow(
      /does not decrypt/,
    );
    await expect(checkEncryptionKey(enc.pool, createConfigCipher(undefined))).rejects.toThrow(
      /CONNECTIONS_ENCRYPTION_KEY is not set/,
    );
    // A ciphertext moved to another row does not decrypt either.
    const other = await enc.request('POST', '/connection-configuration', { body: http('other') });
    await enc.pool.query(
      "UPDATE connection_configurations SET configuration_encrypted = (SELECT configuration_encrypted FROM connection_configurations WHERE name = 'vault') WHERE id = $1",
      [other.body.id],
    );
    const moved = await enc.request('GET', `/connection-configuration/${other.body.id}`);
    expect(moved.status).toBe(500);
    expect(JSON.stringify(moved.body)).not.toContain('api.example.com');
  });
});
