import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../src/api/server.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';

/**
 * The API's database budget is its own: a statement has a time limit, a client that leaves takes its
 * statement with it, and the worker's pool being used up does not reach the API.
 */
let h: Harness;
let server: Server;
let base: string;
const STATEMENT_TIMEOUT_MS = 3_000;

beforeAll(async () => {
  h = await createHarness({ worker: false, apiStatementTimeoutMs: STATEMENT_TIMEOUT_MS });
  server = serveApi(h.app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await h?.close();
});

/** A Running plan whose row another transaction holds locked, so that its cancel has to wait. */
async function lockedPlan(id: string): Promise<pg.PoolClient> {
  await h.pool.query(
    `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, job_total, created_at)
     VALUES ($1, '', '[{"type":"Cancel"}]', '{"names":["nobody"]}', 'x', 3, 0, now())`,
    [id],
  );
  const holder = await h.workerPool.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT 1 FROM alteration_plans WHERE id = $1 FOR UPDATE', [id]);
  return holder;
}

async function release(holder: pg.PoolClient) {
  await holder.query('ROLLBACK');
  holder.release();
}

describe('the API database budget', () => {
  it('answers 503 problem+json when a statement runs past API_STATEMENT_TIMEOUT_MS, and writes nothing', async () => {
    const holder = await lockedPlan('slow-plan');
    try {
      const started = Date.now();
      const r = await h.request('POST', '/alterations/slow-plan/cancel');
      const elapsed = Date.now() - started;
      expect(r.status).toBe(503);
      expect(r.headers.get('content-type')).toBe('application/problem+json');
      expect(r.body.detail).toMatch(/time limit/);
      expect(elapsed).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 100);
      expect(elapsed).toBeLessThan(STATEMENT_TIMEOUT_MS + 5_000);
    } finally {
      await release(holder);
    }
    const { rows } = await h.pool.query("SELECT status FROM alteration_plans WHERE id = 'slow-plan'");
    expect(rows[0].status).toBe(3);
  });

  it('cancels the statement of a client that went away', async () => {
    const holder = await lockedPlan('abandoned-plan');
    try {
      const controller = new AbortController();
      const request = fetch(`${base}/alterations/abandoned-plan/cancel`, {
        method: 'POST',
        headers: { authorization: `ApiKey ${h.adminKey}` },
        signal: controller.signal,
      }).catch((err: unknown) => err);
      const waiting = () =>
        h.workerPool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'workflow-alterations-api' AND state = 'active' AND query LIKE '%FOR NO KEY UPDATE%'`,
        );
      await eventually(
        async () => ((await waiting()).rows[0]!.n === 1 ? true : undefined),
        'the cancel to wait on the lock',
        5_000,
      );
      const abortedAt = Date.now();
      controller.abort();
      expect(await request).toBeInstanceOf(Error);
      // Gone well before the statement timeout would have ended it.
      await eventually(
        async () => ((await waiting()).rows[0]!.n === 0 ? true : undefined),
        'the abandoned statement to be cancelled',
        STATEMENT_TIMEOUT_MS - 1_000,
      );
      expect(Date.now() - abortedAt).toBeLessThan(STATEMENT_TIMEOUT_MS - 1_000);
    } finally {
      await release(holder);
    }
    const { rows } = await h.pool.query("SELECT status FROM alteration_plans WHERE id = 'abandoned-plan'");
    expect(rows[0].status).toBe(3);
  });

  it('keeps answering while every connection of the worker pool is taken', async () => {
    const taken: pg.PoolClient[] = [];
    try {
      for (let i = 0; i < 10; i++) taken.push(await h.workerPool.connect());
      const started = Date.now();
      const defs = await fetch(`${base}/workflow-definitions`, { headers: { authorization: `ApiKey ${h.adminKey}` } });
      expect(defs.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      for (const c of taken) c.release();
    }
  });
});
