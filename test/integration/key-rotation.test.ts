import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';

// Rotating the service's two keys without a stop of the world (docs/operations.md): every node is restarted
// with the new key and the old one as *_PREVIOUS; once the old tokens have expired and every configuration
// is under the new key, *_PREVIOUS goes. Each step below is a restart on the same database.

const open: Harness[] = [];
const start = async (o: Parameters<typeof createHarness>[0]) => {
  const h = await createHarness({ worker: false, ...o });
  open.push(h);
  return h;
};
afterEach(async () => {
  // The first harness owns the database: it closes last.
  for (const h of open.reverse()) await h.close();
  open.length = 0;
});

describe('AUTH_SIGNING_KEY rotation', () => {
  it('accepts tokens of the previous key until they expire, and signs new ones with the current key only', async () => {
    const before = await start({ config: { authSigningKey: 'the signing key before the rotation' } });
    const user = await before.request('POST', '/identity/users', {
      body: { name: 'rotator', password: 'pass-word-123', permissions: ['alterations:view'] },
    });
    expect(user.status).toBe(201);
    const login = await before.request('POST', '/identity/login', {
      key: null,
      body: { username: 'rotator', password: 'pass-word-123' },
    });
    expect(login.status).toBe(200);
    const { accessToken, refreshToken } = login.body as { accessToken: string; refreshToken: string };
    const bearer = (h: Harness, token: string) =>
      h.request('GET', '/alterations', { key: null, headers: { authorization: `Bearer ${token}` } });

    const during = await start({
      database: before.database,
      config: {
        authSigningKey: 'the signing key after the rotation',
        authSigningKeyPrevious: 'the signing key before the rotation',
      },
    });
    expect((await bearer(during, accessToken)).status).toBe(200);
    const refreshed = await during.request('POST', '/identity/refresh', { key: null, body: { refreshToken } });
    expect(refreshed.status).toBe(200);
    const fresh = (refreshed.body as { accessToken: string }).accessToken;
    expect((await bearer(during, fresh)).status).toBe(200);

    const after = await start({
      database: before.database,
      config: { authSigningKey: 'the signing key after the rotation' },
    });
    // The token refreshed during the rotation is the new key's; the old key's token is refused once it is gone.
    expect((await bearer(after, fresh)).status).toBe(200);
    expect((await bearer(after, accessToken)).status).toBe(401);
    // Nor does a node still on the old key take the new key's token.
    expect((await bearer(before, fresh)).status).toBe(401);
  });
});

describe('CONNECTIONS_ENCRYPTION_KEY rotation', () => {
  it('encrypts every stored configuration again under the new key at start, after which the old key is not needed', async () => {
    const before = await start({ encryptionKey: 'the encryption key before the rotation' });
    const ids: string[] = [];
    for (const name of ['orders', 'billing', 'shipping']) {
      const created = await before.request('POST', '/connection-configuration', {
        body: {
          name,
          connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
          connectionConfiguration: { baseUrl: `https://${name}.example.com`, bearerToken: `secret-${name}` },
        },
      });
      expect(created.status).toBe(201);
      ids.push((created.body as { id: string }).id);
    }
    const stored = async (h: Harness) =>
      (
        await h.pool.query<{ blob: Buffer }>(
          'SELECT configuration_encrypted AS blob FROM connection_configurations ORDER BY id',
        )
      ).rows.map((r) => r.blob.toString('base64'));
    const old = await stored(before);

    // Without the previous key the new one cannot read what is stored: the start refuses, naming the key.
    await expect(
      createHarness({
        worker: false,
        database: before.database,
        encryptionKey: 'the encryption key after the rotation',
      }),
    ).rejects.toThrow(/CONNECTIONS_ENCRYPTION_KEY does not decrypt/);

    const during = await start({
      database: before.database,
      encryptionKey: 'the encryption key after the rotation',
      config: { connectionsEncryptionKeyPrevious: 'the encryption key before the rotation' },
    });
    const now = await stored(during);
    expect(now.every((blob, i) => blob !== old[i])).toBe(true);
    expect(during.logs.some((l) => l.reencrypted === 3)).toBe(true);

    const after = await start({
      database: before.database,
      encryptionKey: 'the encryption key after the rotation',
    });
    for (const [i, id] of ids.entries()) {
      const got = await after.request('GET', `/connection-configuration/${id}`);
      expect(got.status).toBe(200);
      expect(got.body.connectionConfiguration.baseUrl).toBe(
        `https://${['orders', 'billing', 'shipping'][i]}.example.com`,
      );
    }
    // The old key alone no longer reads them.
    await expect(
      createHarness({
        worker: false,
        database: before.database,
        encryptionKey: 'the encryption key before the rotation',
      }),
    ).rejects.toThrow(/does not decrypt/);
  });
});
