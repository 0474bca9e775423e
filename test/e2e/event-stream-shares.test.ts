import type { AddressInfo, Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../src/api/server.js';
import { createHarness, type Harness } from '../support/harness.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Event streams are a per-tenant share of each API node (contract section 8): a tenant past
 * EVENT_STREAMS_PER_TENANT gets 429 while the others still open theirs; only EVENT_STREAMS_PER_NODE gives
 * 503; and a stream whose key is revoked, whose user is deleted or signed out ends within 10 s. Over real
 * sockets, on plans that stay Pending (no worker), so streams stay open until the test ends them.
 */
let h: Harness;
let server: Server;
let base: string;
const open: AbortController[] = [];

beforeAll(async () => {
  h = await createHarness({ worker: false, shares: { eventStreamsPerTenant: 3, eventStreamsPerNode: 5 } });
  server = serveApi(h.app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const c of open) c.abort();
  await new Promise((resolve) => server?.close(resolve));
  await h?.close();
});

/** A Pending plan of the tenant of `key` (no worker runs it). */
async function pendingPlan(key: string, id: string): Promise<string> {
  const def = await h.request('POST', '/workflow-definitions', { key, body: approvalWithNote(`def-${id}`) });
  expect(def.status).toBe(201);
  const r = await h.request('POST', '/alterations/submit', {
    key,
    body: {
      id,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
      filter: { definitionIds: [`def-${id}`] },
    },
  });
  expect(r.status).toBe(202);
  return id;
}

/** Opens a stream; its answer once the headers are in (the body stays open until aborted). */
async function stream(planId: string, authorization: string) {
  const controller = new AbortController();
  open.push(controller);
  const res = await fetch(`${base}/alterations/${planId}/events`, {
    headers: { authorization, accept: 'text/event-stream' },
    signal: controller.signal,
  });
  return { res, controller };
}

/** Reads the stream until it ends; how long that took. */
async function untilEnd(res: Response): Promise<{ ms: number; text: string }> {
  const started = performance.now();
  const text = await res.text();
  return { ms: performance.now() - started, text };
}

const apiKey = (key: string) => `ApiKey ${key}`;

describe('event streams', () => {
  it('are a per-tenant share: 429 past it for that tenant only, 503 only at the node limit', async () => {
    const keyA = await h.keyWith(['*'], 'tenant-a');
    const keyB = await h.keyWith(['*'], 'tenant-b');
    const keyC = await h.keyWith(['*'], 'tenant-c');
    const planA = await pendingPlan(keyA, 'plan-a');
    const planB = await pendingPlan(keyB, 'plan-b');
    const planC = await pendingPlan(keyC, 'plan-c');

    const mine = await Promise.all([1, 2, 3].map(() => stream(planA, apiKey(keyA))));
    for (const s of mine) expect(s.res.status).toBe(200);
    const over = await stream(planA, apiKey(keyA));
    expect(over.res.status).toBe(429);
    expect(over.res.headers.get('content-type')).toContain('application/problem+json');
    expect(Number(over.res.headers.get('retry-after'))).toBeGreaterThan(0);
    const problem = (await over.res.json()) as { detail: string; traceId?: string; type: string };
    expect(problem.detail).toContain('EVENT_STREAMS_PER_TENANT');
    expect(problem.traceId).toEqual(expect.any(String));

    // Tenant A holds its whole share; tenant B's streams on its own plan open as if A were not there.
    const b1 = await stream(planB, apiKey(keyB));
    const b2 = await stream(planB, apiKey(keyB));
    expect([b1.res.status, b2.res.status]).toEqual([200, 200]);
    const first = await b1.res.body!.getReader().read();
    expect(new TextDecoder().decode(first.value)).toContain('event: progress');

    // Five streams open: the node's limit. Now anyone gets 503 (not 429), with a traceId.
    const full = await stream(planC, apiKey(keyC));
    expect(full.res.status).toBe(503);
    const nodeProblem = (await full.res.json()) as { detail: string; traceId?: string };
    expect(nodeProblem.detail).toContain('EVENT_STREAMS_PER_NODE');
    expect(nodeProblem.traceId).toEqual(expect.any(String));

    // A closed stream gives its place back, to its own tenant first of all.
    mine[0]!.controller.abort();
    const again = await retry(
      () => stream(planA, apiKey(keyA)),
      (s) => s.res.status === 200,
    );
    expect(again.res.status).toBe(200);
    for (const s of [...mine, again, b1, b2]) s.controller.abort();
  });

  it('end within 10 s once their key is revoked', async () => {
    const created = await h.request('POST', '/identity/api-keys', {
      body: {
        name: 'watcher',
        permissions: ['alterations:view', 'alterations:execute', 'workflows/definitions:create'],
      },
    });
    const planId = await pendingPlan(created.body.key, 'plan-revoked-key');
    const { res } = await stream(planId, apiKey(created.body.key));
    expect(res.status).toBe(200);
    const ended = untilEnd(res);
    expect((await h.request('DELETE', `/identity/api-keys/${created.body.id}`)).status).toBe(204);
    const { ms, text } = await ended;
    expect(ms).toBeLessThan(10_000);
    expect(text).toContain('ended: the credentials of this stream were revoked');
    expect(text).not.toContain('event: done');
  });

  it('end within 10 s once their user signs out, and once their user is deleted', async () => {
    for (const how of ['sign-out', 'delete'] as const) {
      const name = `watcher-${how}`;
      const user = await h.request('POST', '/identity/users', {
        body: {
          name,
          password: 'correct horse battery',
          permissions: ['alterations:view', 'alterations:execute', 'workflows/definitions:create'],
          tenantId: 'tenant-users',
        },
      });
      expect(user.status).toBe(201);
      const login = await h.request('POST', '/identity/login', {
        key: null,
        body: { username: name, password: 'correct horse battery' },
      });
      const bearer = `Bearer ${login.body.accessToken}`;
      const planId = `plan-${how}`;
      const def = await h.request('POST', '/workflow-definitions', {
        key: null,
        headers: { authorization: bearer },
        body: approvalWithNote(`def-${planId}`),
      });
      expect(def.status).toBe(201);
      const submitted = await h.request('POST', '/alterations/submit', {
        key: null,
        headers: { authorization: bearer },
        body: {
          id: planId,
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
          filter: { definitionIds: [`def-${planId}`] },
        },
      });
      expect(submitted.status).toBe(202);
      const { res } = await stream(planId, bearer);
      expect(res.status).toBe(200);
      const ended = untilEnd(res);
      if (how === 'sign-out') {
        const out = await h.request('POST', '/identity/logout', { key: null, headers: { authorization: bearer } });
        expect(out.status).toBe(204);
      } else {
        expect((await h.request('DELETE', `/identity/users/${user.body.id}`)).status).toBe(204);
      }
      const { ms } = await ended;
      expect(ms, how).toBeLessThan(10_000);
    }
  });
});

/** Calls `fn` until `ok` holds (a closed stream frees its place a moment after the socket closes). */
async function retry<T>(fn: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}
