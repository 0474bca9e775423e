import type { AddressInfo, Server } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../src/api/server.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * The API's database connections are a per-tenant share of each node (TENANT_API_CONNECTIONS, contract
 * section 8). Tenant A's requests are made to hold connections for seconds (each waits on row locks its own
 * instances are held under); tenant B's requests on the same node are measured meanwhile. The harness's API
 * pool has 10 connections and a share of 5. Over real sockets.
 */
let h: Harness;
let server: Server;
let base: string;
let keyA: string;
let keyB: string;
let idsA: string[];
let keyC: string;
let idsC: string[];

beforeAll(async () => {
  h = await createHarness({ worker: false });
  server = serveApi(h.app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  keyA = await h.keyWith(['*'], 'tenant-a');
  keyB = await h.keyWith(['*'], 'tenant-b');
  const def = await h.request('POST', '/workflow-definitions', { key: keyA, body: approvalWithNote('a-def') });
  idsA = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 12, tenantId: 'tenant-a' });
  keyC = await h.keyWith(['*'], 'tenant-c');
  const defC = await h.request('POST', '/workflow-definitions', { key: keyC, body: approvalWithNote('c-def') });
  idsC = await seedInstances(h.pool, { definitionVersionId: defC.body.id, count: 12, tenantId: 'tenant-c' });
  expect(
    (await h.request('POST', '/workflow-definitions', { key: keyB, body: approvalWithNote('b-def') })).status,
  ).toBe(201);
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await h?.close();
});

async function timed(path: string, key: string, init: RequestInit = {}) {
  const started = performance.now();
  const res = await fetch(`${base}${path}`, {
    ...init,
    headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json', ...init.headers },
  });
  await res.text();
  return { status: res.status, ms: performance.now() - started };
}

describe("one tenant's requests holding database connections", () => {
  it("take at most its share: another tenant's requests go on at once, and its own wait their turn", async () => {
    // Row locks on all of tenant A's instances, from outside the service's pools.
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('SELECT 1 FROM workflow_instances WHERE id = ANY($1::text[]) FOR UPDATE', [idsA]);
    let released = false;
    try {
      // Ten of A's requests: each takes a connection and waits on a lock of its instance while holding it.
      const flood = idsA.slice(0, 10).map((id) =>
        timed('/alterations/run', keyA, {
          method: 'POST',
          body: JSON.stringify({
            alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
            workflowInstanceIds: [id],
          }),
        }),
      );
      await waitFor(async () => {
        return (await waitingOnLocks()) >= 5;
      });
      // A holds its five; B is served as if A were not there, and so is /health.
      const b = [];
      for (let i = 0; i < 10; i++) b.push(await timed('/workflow-definitions', keyB));
      expect(b.every((r) => r.status === 200)).toBe(true);
      expect(Math.max(...b.map((r) => r.ms))).toBeLessThan(1_000);
      const health = await fetch(`${base}/health`);
      expect(health.status).toBe(200);
      expect(await waitingOnLocks()).toBe(5);

      // Once A's locks go, its waiting requests get their turn and all ten succeed.
      await locker.query('ROLLBACK');
      released = true;
      const answers = await Promise.all(flood);
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    } finally {
      if (!released) await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
  });

  it('answers 503 to a request of that tenant that waited past the acquire timeout, naming the setting', async () => {
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('SELECT 1 FROM workflow_instances WHERE id = ANY($1::text[]) FOR UPDATE', [idsA]);
    try {
      const flood = idsA.slice(0, 6).map((id) =>
        fetch(`${base}/alterations/run`, {
          method: 'POST',
          headers: { authorization: `ApiKey ${keyA}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 2 }],
            workflowInstanceIds: [id],
          }),
        }),
      );
      // The sixth waits 5 s for a turn that does not come while the locks stand.
      const sixth = await Promise.race(
        flood.map(async (p) => {
          const res = await p;
          return { status: res.status, body: (await res.json()) as { detail: string; traceId: string } };
        }),
      );
      expect(sixth.status).toBe(503);
      expect(sixth.body.detail).toContain('TENANT_API_CONNECTIONS');
      expect(sixth.body.traceId).toEqual(expect.any(String));
      await locker.query('ROLLBACK');
      const statuses = (await Promise.all(flood)).map((r) => r.status).sort();
      expect(statuses).toEqual([200, 200, 200, 200, 200, 503]);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
  });
});

describe('two tenants holding their whole shares', () => {
  it('leave the connections credential checks and /health need: both answer at once', async () => {
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('SELECT 1 FROM workflow_instances WHERE id = ANY($1::text[]) FOR UPDATE', [[...idsA, ...idsC]]);
    const run = (key: string, id: string) =>
      fetch(`${base}/alterations/run`, {
        method: 'POST',
        headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 3 }],
          workflowInstanceIds: [id],
        }),
      }).then((r) => r.status);
    try {
      const flood = [...idsA.slice(0, 6).map((id) => run(keyA, id)), ...idsC.slice(0, 6).map((id) => run(keyC, id))];
      // A holds its 5, C the 3 left of the 8 the tenants may hold together (10 less 2 kept back).
      await waitFor(async () => {
        return (await waitingOnLocks()) >= 8;
      });
      for (let i = 0; i < 5; i++) {
        const health = await timed('/health', keyB);
        expect(health.status).toBe(200);
        expect(health.ms).toBeLessThan(1_000);
        const unknown = await timed('/workflow-definitions', 'wfa_not_a_key');
        expect(unknown.status).toBe(401);
        expect(unknown.ms).toBeLessThan(1_000);
      }
      await locker.query('ROLLBACK');
      expect((await Promise.all(flood)).every((status) => status === 200 || status === 503)).toBe(true);
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
  });
});

/** The API's connections waiting on a row lock now: requests holding a connection while they wait. */
async function waitingOnLocks(): Promise<number> {
  const { rows } = await h.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = 'workflow-alterations-api'`,
  );
  return rows[0]!.n;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
