import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { chain, lit, writeLine } from '../support/workflows.js';

const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';

let h: Harness;
let server: Server;
let baseUrl: string;
const received: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
let respondWith = 200;
/** While set, requests wait for it to be called (a call that stays out). */
let holding: Promise<void> | undefined;

const sendRequest = (connectionName: string | null) => ({
  id: 'call',
  type: 'Elsa.Http.SendHttpRequest',
  version: 1,
  connection: { typeName: `ConnectionProperties<${HTTP}>`, expression: { type: 'Literal', value: { connectionName } } },
  method: lit('POST'),
  path: lit('/orders/42'),
  body: lit({ approved: true }, 'Object'),
  resultVariable: lit('status'),
});

const workflow = (definitionId: string, connectionName: string | null) =>
  chain(definitionId, [sendRequest(connectionName), writeLine('after', 'called')], {
    variables: [{ id: 'status', name: 'Status', typeName: 'Int32' }],
  });

async function runToEnd(definitionId: string) {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  expect(r.status).toBe(202);
  const id = r.body.workflowInstanceId as string;
  return eventually(async () => {
    const i = (await h.request('GET', `/workflow-instances/${id}`)).body;
    return i.subStatus === 'Finished' || i.subStatus === 'Faulted' ? i : undefined;
  }, `instance ${id} to finish or fault`);
}

const status = (i: { variables: { id: string; value: unknown }[] }) =>
  i.variables.find((v) => v.id === 'status')?.value;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      void (holding ?? Promise.resolve()).then(() => {
        res.statusCode = respondWith;
        res.end('{}');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('Elsa.Http.SendHttpRequest through a saved connection', () => {
  it('calls the connection with its headers and token, records the status, and masks the no-log input', async () => {
    const created = await h.request('POST', '/connection-configuration', {
      body: {
        name: 'orders-api',
        connectionType: HTTP,
        connectionConfiguration: { baseUrl, headers: { 'x-api-key': 'key-1' }, bearerToken: 'token-1' },
      },
    });
    expect(created.status).toBe(201);
    expect(
      (await h.request('POST', '/workflow-definitions', { body: workflow('call-orders', 'orders-api') })).status,
    ).toBe(201);

    const first = await runToEnd('call-orders');
    expect(first.subStatus).toBe('Finished');
    expect(status(first)).toBe(200);
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ method: 'POST', url: '/api/orders/42', body: '{"approved":true}' });
    expect(received[0]!.headers).toMatchObject({
      'x-api-key': 'key-1',
      authorization: 'Bearer token-1',
      'content-type': 'application/json',
    });
    const record = first.activityRecords.find((r: { activityId: string }) => r.activityId === 'call');
    expect(record.inputs).toEqual({
      connection: '****',
      method: 'POST',
      path: '/orders/42',
      body: { approved: true },
      resultVariable: 'status',
    });
    expect(JSON.stringify(first)).not.toContain('orders-api');

    // The next run uses the connection as updated.
    const updated = await h.request('PUT', `/connection-configuration/${created.body.id}`, {
      body: {
        name: 'orders-api',
        connectionType: HTTP,
        connectionConfiguration: { baseUrl, headers: { 'x-api-key': 'key-2' } },
      },
    });
    expect(updated.status).toBe(200);
    const second = await runToEnd('call-orders');
    expect(second.subStatus).toBe('Finished');
    expect(received[1]!.headers['x-api-key']).toBe('key-2');
    expect(received[1]!.headers.authorization).toBeUndefined();

    // A non-2xx status is stored, then faults the activity naming the connection.
    respondWith = 503;
    const failing = await runToEnd('call-orders');
    respondWith = 200;
    expect(failing).toMatchObject({ status: 'Running', subStatus: 'Faulted', incidentCount: 1 });
    expect(status(failing)).toBe(503);
    expect(failing.incidents[0].message).toBe('HTTP request through connection "orders-api" returned status 503');

    // With the connection deleted, the activity faults on purpose and the log says why.
    expect((await h.request('DELETE', `/connection-configuration/${created.body.id}`)).status).toBe(204);
    const calls = received.length;
    const orphan = await runToEnd('call-orders');
    expect(orphan.subStatus).toBe('Faulted');
    expect(orphan.incidents[0]).toMatchObject({
      activityId: 'call',
      activityType: 'Elsa.Http.SendHttpRequest',
      message: `Connection "orders-api" could not be resolved: no ${HTTP} of that name exists in this tenant`,
    });
    expect(received).toHaveLength(calls);
    expect(
      h.logs.some(
        (l) =>
          l.level === 40 &&
          l.msg === 'connection not found; the activity runs with an unresolved connection' &&
          l.connectionName === 'orders-api' &&
          l.instanceId === orphan.id,
      ),
    ).toBe(true);
    // Nothing secret reached the log.
    const logText = JSON.stringify(h.logs);
    expect(logText).not.toContain('token-1');
    expect(logText).not.toContain('key-1');
  });

  it('faults clearly when no connection is selected, and resolves only within the tenant', async () => {
    expect((await h.request('POST', '/workflow-definitions', { body: workflow('call-nothing', null) })).status).toBe(
      201,
    );
    const none = await runToEnd('call-nothing');
    expect(none.incidents[0].message).toBe('No connection is selected for Send HTTP Request');
    expect(
      h.logs.some(
        (l) => l.level === 40 && l.msg === 'no connection selected; the activity runs with an unresolved connection',
      ),
    ).toBe(true);

    const other = await h.keyWith(['*'], 'tenant-b');
    await h.request('POST', '/connection-configuration', {
      key: other,
      body: { name: 'b-only', connectionType: HTTP, connectionConfiguration: { baseUrl } },
    });
    expect((await h.request('POST', '/workflow-definitions', { body: workflow('call-b', 'b-only') })).status).toBe(201);
    const calls = received.length;
    const crossTenant = await runToEnd('call-b');
    expect(crossTenant.subStatus).toBe('Faulted');
    expect(received).toHaveLength(calls);
  });

  it("counts an instance whose call is out as having the call scheduled on its definition's activity counts", async () => {
    await h.request('POST', '/connection-configuration', {
      body: { name: 'held-api', connectionType: HTTP, connectionConfiguration: { baseUrl } },
    });
    expect((await h.request('POST', '/workflow-definitions', { body: workflow('call-held', 'held-api') })).status).toBe(
      201,
    );
    let release!: () => void;
    holding = new Promise<void>((resolve) => (release = resolve));
    const counts = async () =>
      (await h.request('GET', '/workflow-definitions/call-held/activity-counts')).body.items.map(
        (a: { activityId: string; waiting: number; scheduled: number; faulted: number }) =>
          `${a.activityId} ${a.waiting}/${a.scheduled}/${a.faulted}`,
      );
    try {
      const calls = received.length;
      const r = await h.request('POST', '/workflow-instances', { body: { definitionId: 'call-held' } });
      expect(r.status).toBe(202);
      await eventually(async () => (received.length > calls ? true : undefined), 'the call to go out');
      expect(await counts()).toEqual(['call 0/1/0', 'after 0/0/0']);
    } finally {
      holding = undefined;
      release();
    }
    await eventually(
      async () => ((await counts()).join() === 'call 0/0/0,after 0/0/0' ? true : undefined),
      'the instance to finish and leave the counts',
    );
  });

  it('rejects a definition whose connection input is not {connectionName}', async () => {
    const bad = workflow('bad-input', 'x');
    (bad.root.activities[0] as Record<string, unknown>).connection = lit('orders-api');
    const r = await h.request('POST', '/workflow-definitions', { body: bad });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].path).toBe('/root/activities/0/connection/expression/value');
    const noVariable = workflow('bad-result', 'x');
    (noVariable.root.activities[0] as Record<string, unknown>).resultVariable = lit('undeclared');
    const r2 = await h.request('POST', '/workflow-definitions', { body: noVariable });
    expect(r2.status).toBe(400);
    expect(r2.body.errors).toEqual([
      {
        path: '/root/activities/0/resultVariable/expression/value',
        message: 'Variable with ID "undeclared" is not defined in this workflow',
      },
    ]);
  });
});
