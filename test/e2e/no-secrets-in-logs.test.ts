import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { lit } from '../support/workflows.js';

const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
let h: Harness;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  h = await createHarness({ encryptionKey: 'ENCRYPTION-KEY-never-logged-0123456789' });
});
afterAll(async () => {
  await h?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('logs', () => {
  it('carry no password, key, token or connection configuration through a full scenario', async () => {
    const secrets: string[] = [
      h.adminKey,
      'ENCRYPTION-KEY-never-logged-0123456789',
      'USER-PASSWORD-9f8e7d',
      'HASHED-SECRET-abc123',
      'CONN-TOKEN-5a4b3c',
      'CONN-HEADER-1q2w3e',
    ];
    const user = await h.request('POST', '/identity/users', {
      body: { name: 'logger-user', password: 'USER-PASSWORD-9f8e7d', permissions: ['*'] },
    });
    expect(user.status).toBe(201);
    const login = await h.request('POST', '/identity/login', {
      key: null,
      body: { username: 'logger-user', password: 'USER-PASSWORD-9f8e7d' },
    });
    const bad = await h.request('POST', '/identity/login', {
      key: null,
      body: { username: 'logger-user', password: 'USER-PASSWORD-9f8e7d-wrong' },
    });
    expect(bad.status).toBe(401);
    const refreshed = await h.request('POST', '/identity/refresh', {
      key: null,
      body: { refreshToken: login.body.refreshToken },
    });
    secrets.push(
      login.body.accessToken,
      login.body.refreshToken,
      refreshed.body.accessToken,
      refreshed.body.refreshToken,
    );
    const auth = { key: null, headers: { authorization: `Bearer ${refreshed.body.accessToken}` } };
    const key = await h.request('POST', '/identity/api-keys', {
      ...auth,
      body: { name: 'k', permissions: ['alterations:view'] },
    });
    secrets.push(key.body.key);
    await h.request('GET', '/alterations', { key: key.body.key });
    await h.request('GET', '/alterations', { key: 'wfa_UNKNOWN-KEY-xyz' });
    secrets.push('wfa_UNKNOWN-KEY-xyz');
    const hash = await h.request('POST', '/identity/secrets/hash', {
      ...auth,
      body: { secret: 'HASHED-SECRET-abc123' },
    });
    secrets.push(hash.body.hash);

    await h.request('POST', '/connection-configuration', {
      ...auth,
      body: {
        name: 'api',
        connectionType: HTTP,
        connectionConfiguration: {
          baseUrl,
          headers: { 'x-k': 'CONN-HEADER-1q2w3e' },
          bearerToken: 'CONN-TOKEN-5a4b3c',
        },
      },
    });
    await h.request('POST', '/connection-configuration', {
      ...auth,
      body: {
        name: 'bad',
        connectionType: HTTP,
        connectionConfiguration: { baseUrl: 'x', bearerToken: 'CONN-TOKEN-5a4b3c' },
      },
    });
    await h.request('POST', '/workflow-definitions', {
      ...auth,
      body: {
        definitionId: 'call',
        root: {
          type: 'Elsa.Flowchart',
          id: 'f',
          activities: [
            {
              id: 'c',
              type: 'Elsa.Http.SendHttpRequest',
              connection: {
                typeName: `ConnectionProperties<${HTTP}>`,
                expression: { type: 'Literal', value: { connectionName: 'api' } },
              },
              path: lit('/x'),
            },
          ],
          connections: [],
        },
      },
    });
    const started = await h.request('POST', '/workflow-instances', { ...auth, body: { definitionId: 'call' } });
    await eventually(
      async () =>
        (await h.request('GET', `/workflow-instances/${started.body.workflowInstanceId}`)).body.status === 'Finished'
          ? true
          : undefined,
      'the call',
    );
    await h.request('POST', '/identity/logout', auth);

    expect(h.logs.length).toBeGreaterThan(10);
    const text = JSON.stringify(h.logs);
    for (const secret of secrets)
      expect(text.includes(secret), `a log line contains ${secret.slice(0, 12)}…`).toBe(false);
  });
});
