import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { chain, lit, writeLine } from '../support/workflows.js';

/**
 * One delivery of a call at a time (attack report L3): a revert that brings an instance back from a Cancel
 * made while its outbound call was out makes the call again, with the same Idempotency-Key, but only once
 * the cancelled delivery has ended. A receiver that records a key when it finishes must never see the same
 * key twice at once. Real Postgres, real Temporal, a local endpoint that holds requests until told.
 */
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
const run = Math.random().toString(36).slice(2, 8);

let h: Harness;
let server: Server;
/** Every request the endpoint got, by Idempotency-Key, in order. */
const received = new Map<string, number>();
/** The most requests with one key the endpoint held at once. */
const mostAtOnce = new Map<string, number>();
const out = new Map<string, number>();
const held: ServerResponse[] = [];
let answerAtOnce = false;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    const key = String(req.headers['idempotency-key']);
    received.set(key, (received.get(key) ?? 0) + 1);
    out.set(key, (out.get(key) ?? 0) + 1);
    mostAtOnce.set(key, Math.max(mostAtOnce.get(key) ?? 0, out.get(key)!));
    res.on('close', () => out.set(key, out.get(key)! - 1));
    if (answerAtOnce) res.writeHead(200).end('ok');
    else held.push(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h = await createHarness({ outboundAllowNetworks: ['127.0.0.0/8'] });
  const connection = await h.request('POST', '/connection-configuration', {
    body: {
      name: `slow-${run}`,
      connectionType: HTTP,
      connectionConfiguration: {
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        timeoutMs: 60_000,
      },
    },
  });
  expect(connection.status, JSON.stringify(connection.body)).toBe(201);
  const definition = chain(`slow-call-${run}`, [
    writeLine('start', 'started'),
    {
      id: 'call',
      type: 'Elsa.Http.SendHttpRequest',
      version: 1,
      connection: {
        typeName: `ConnectionProperties<${HTTP}>`,
        expression: { type: 'Literal', value: { connectionName: `slow-${run}` } },
      },
      method: lit('POST'),
      path: lit('slow'),
    },
    writeLine('called', 'called'),
  ]);
  const published = await h.request('POST', '/workflow-definitions', { body: definition });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
});
afterAll(async () => {
  for (const res of held.splice(0)) res.destroy();
  await h?.close();
  await new Promise((resolve) => server?.close(resolve));
});

const instance = async (id: string) => (await h.request('GET', `/workflow-instances/${id}`)).body;
const records = (i: { activityRecords: { activityId: string; status: string }[] }) =>
  Object.fromEntries(i.activityRecords.map((r) => [r.activityId, r.status]));

async function completed(planId: string) {
  return eventually(
    async () => ((await h.request('GET', `/alterations/${planId}`)).body.plan?.status === 4 ? true : undefined),
    `plan ${planId} to complete`,
  );
}

describe('a revert of a Cancel made while the call was out', () => {
  it('makes the call again only once the cancelled delivery has ended: never two of one key at once', async () => {
    const started = await h.request('POST', '/workflow-instances', { body: { definitionId: `slow-call-${run}` } });
    expect(started.status).toBe(202);
    const id = started.body.workflowInstanceId as string;
    await eventually(async () => (held.length === 1 ? true : undefined), 'the call to reach the endpoint');
    const [key] = [...received.keys()];
    expect(key).toMatch(new RegExp(`^${id}:`));

    const cancel = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: [id] } },
    });
    await completed(cancel.body.planId as string);
    const revert = await h.request('POST', `/alterations/${cancel.body.planId as string}/revert`, { body: {} });
    expect(revert.status).toBe(202);
    await completed(revert.body.planId as string);
    expect(records(await instance(id))).toMatchObject({ call: 'Running' });

    // The instance's workflow wants to make the call again, but the cancelled delivery is still out.
    await new Promise((r) => setTimeout(r, 6_000));
    expect(received.get(key!)).toBe(1);
    expect(held).toHaveLength(1);

    // The cancelled delivery ends; then the call is made again, and its outcome is applied once.
    answerAtOnce = true;
    held.shift()!.writeHead(200).end('ok');
    const done = await eventually(
      async () => {
        const i = await instance(id);
        return i.subStatus === 'Finished' ? i : undefined;
      },
      'the instance to finish',
      30_000,
    );
    expect(received.get(key!)).toBe(2);
    expect(mostAtOnce.get(key!)).toBe(1);
    expect(records(done)).toEqual({ start: 'Completed', call: 'Completed', called: 'Completed' });
    expect(done.journal.map((j: { message: string }) => j.message).filter((m: string) => m === 'called')).toEqual([
      'called',
    ]);
  }, 90_000);
});
