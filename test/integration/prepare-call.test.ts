import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConfigCipher } from '../../src/connections/cipher.js';
import { DefinitionCache } from '../../src/engine/definitions.js';
import { type EngineDeps, prepareCall } from '../../src/engine/executor.js';
import { createLogger } from '../../src/logger.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { chain, lit } from '../support/workflows.js';

/**
 * Part two of an outbound step (`prepareCall`, the calls activity) reads the connection its first part named in
 * the same statement as the record and the instance. The answer must be what reading it apart gives: the
 * tenant's own connection before a tenant-agnostic one of the same name, decrypted; and a name the inputs no
 * longer select is not trusted. Real Postgres, connections stored encrypted.
 */
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
const KEY = 'the key the stored connection configurations are encrypted with';
let h: Harness;
let deps: EngineDeps;
let statements: string[];
let instanceId: string;
let recordId: string;

beforeAll(async () => {
  h = await createHarness({ worker: false, encryptionKey: KEY });
  const created = await h.request('POST', '/connection-configuration', {
    body: { name: 'ep', connectionType: HTTP, connectionConfiguration: { baseUrl: 'http://10.1.2.3:8080/' } },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  // A tenant-agnostic connection of the same name (stored in the clear), which the tenant's own wins over;
  // another tenant's of the same name, which the tenant never sees; and one of another name whose ciphertext no
  // key opens, so that reading it fails if it is decrypted at all.
  await h.pool.query(
    `INSERT INTO connection_configurations
       (id, tenant_id, name, connection_type, configuration, configuration_encrypted, created_at, updated_at)
     VALUES ('agnostic-ep', '*', 'ep', $1, '{"baseUrl": "http://10.9.9.9/"}', NULL, now(), now()),
            ('tenant-b-ep', 'tenant-b', 'ep', $1, '{"baseUrl": "http://10.7.7.7/"}', NULL, now(), now()),
            ('undecryptable', '', 'other', $1, NULL, '\\x00010203', now(), now())`,
    [HTTP],
  );
  const def = await h.request('POST', '/workflow-definitions', {
    body: chain('prepare-call', [
      {
        id: 'call',
        type: 'Elsa.Http.SendHttpRequest',
        version: 1,
        connection: {
          typeName: `ConnectionProperties<${HTTP}>`,
          expression: { type: 'Literal', value: { connectionName: 'ep' } },
        },
        method: lit('POST'),
        path: lit('/hook'),
      },
    ]),
  });
  expect(def.status, JSON.stringify(def.body)).toBe(201);
  instanceId = (
    await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1, subStatus: 'Executing' })
  )[0]!;
  const { rows } = await h.pool.query<{ id: string }>(
    `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, status, started_at)
     VALUES ($1, '', 'call', 'flow1:call', 'Elsa.Http.SendHttpRequest', 'Running', now()) RETURNING id::text`,
    [instanceId],
  );
  recordId = rows[0]!.id;
  const pool = h.workerPool;
  // Every statement the call's preparation sends, to count its round trips.
  const counting = new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'query')
        return (...args: unknown[]) => {
          statements.push(String(typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text));
          return (target.query as (...a: unknown[]) => unknown)(...args);
        };
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  deps = {
    pool: counting,
    definitions: new DefinitionCache(),
    logger: createLogger('silent'),
    cipher: createConfigCipher(KEY),
  };
});
afterAll(() => h?.close());

const prepared = async (connectionName?: string) => {
  statements = [];
  const result = await prepareCall(deps, instanceId, recordId, connectionName);
  return { result, statements: statements.length };
};

describe('prepareCall', () => {
  it('reads the connection its first part named with the record, in one statement, as reading it apart does', async () => {
    await prepared(); // the definition cache warmed
    const apart = await prepared();
    const together = await prepared('ep');
    expect(apart.statements).toBe(2);
    expect(together.statements).toBe(1);
    expect(together.result).toEqual(apart.result);
    expect(together.result).toMatchObject({
      kind: 'call',
      details: { connectionName: 'ep', activityId: 'call' },
      // The tenant's own connection, decrypted; not the tenant-agnostic one of the same name.
      connection: { baseUrl: 'http://10.1.2.3:8080/' },
      request: { method: 'POST', path: '/hook', idempotencyKey: `${instanceId}:${recordId}` },
    });
  });

  it('reads the connection the inputs select when they no longer select the one named, never decrypting that one', async () => {
    const apart = await prepared();
    // 'other' cannot be decrypted: a stale name costs a read, not a failed call.
    const stale = await prepared('other');
    expect(stale.statements).toBe(2);
    expect(stale.result).toEqual(apart.result);
    expect(stale.result).toMatchObject({ connection: { baseUrl: 'http://10.1.2.3:8080/' } });
  });

  it('answers a connection the tenant no longer has as reading it apart does', async () => {
    // The last test of the file: it deletes the connections the others read.
    await h.pool.query(`DELETE FROM connection_configurations WHERE tenant_id = '' AND name = 'ep'`);
    const apart = await prepared();
    const together = await prepared('ep');
    expect(together.statements).toBe(1);
    expect(together.result).toEqual(apart.result);
    // The tenant-agnostic one of the name, now the only one the tenant sees.
    expect(together.result).toMatchObject({ connection: { baseUrl: 'http://10.9.9.9/' } });
    await h.pool.query(`DELETE FROM connection_configurations WHERE id = 'agnostic-ep'`);
    // Only another tenant's 'ep' is left: not this tenant's to use.
    const none = await prepared('ep');
    expect(none.result).toEqual((await prepared()).result);
    expect(none.result).toMatchObject({ kind: 'skip', why: 'its connection or inputs no longer resolve' });
  });
});
