import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, RolledBackError, withTransaction } from '../../src/db/pool.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * `withTransaction` (src/db/pool.ts) against the real database: a transaction that failed unseen is not reported
 * committed, and a connection whose ROLLBACK failed never goes back to the pool inside a failed transaction.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
  await h.pool.query('CREATE TABLE IF NOT EXISTS tx_probe (id text PRIMARY KEY)');
});
afterAll(() => h?.close());

const written = async (id: string) =>
  (await h.pool.query('SELECT 1 FROM tx_probe WHERE id = $1', [id])).rows.length === 1;

describe('a transaction', () => {
  it('whose statement failed and was caught inside it throws at its end instead of reporting a commit', async () => {
    const id = randomUUID();
    const outcome = await withTransaction(h.pool, async (client) => {
      await client.query('INSERT INTO tx_probe (id) VALUES ($1)', [id]);
      // A statement's error swallowed (as a cancel that reached a statement after the one it was meant for
      // would be): Postgres answers the COMMIT with ROLLBACK, not with an error.
      await client.query('SELECT 1 / 0').catch(() => undefined);
      return 'done';
    }).catch((err: unknown) => err);
    expect(outcome).toBeInstanceOf(RolledBackError);
    expect((outcome as Error).message).toBe('the transaction ended with ROLLBACK');
    expect(await written(id)).toBe(false);
  });

  it('commits what it wrote otherwise', async () => {
    const id = randomUUID();
    expect(await withTransaction(h.pool, (c) => c.query('INSERT INTO tx_probe (id) VALUES ($1)', [id]))).toBeTruthy();
    expect(await written(id)).toBe(true);
  });

  it('whose ROLLBACK fails leaves its connection out of the pool', async () => {
    const pool = createPool(h.databaseUrl, 1);
    let pid = 0;
    // The ROLLBACK is answered with an error (as a cancel that reaches it is), and the transaction stays open.
    const failingRollback = Object.create(pool) as pg.Pool;
    failingRollback.connect = (async () => {
      const client = await pool.connect();
      const query = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>;
      (client as unknown as { query: unknown }).query = (...args: unknown[]) =>
        args[0] === 'ROLLBACK'
          ? Promise.reject(Object.assign(new Error('canceling statement due to user request'), { code: '57014' }))
          : query(...args);
      return client;
    }) as pg.Pool['connect'];
    const outcome = await withTransaction(failingRollback, async (client) => {
      pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await client.query('SELECT 1 / 0');
    }).catch((err: unknown) => err);
    expect(outcome).toBeInstanceOf(Error);
    // The pool's one connection is a new one, outside any transaction.
    const { rows } = await pool.query<{ pid: number; open: boolean }>(
      'SELECT pg_backend_pid() AS pid, now() <> statement_timestamp() AS open',
    );
    expect(rows[0]!.pid).not.toBe(pid);
    expect(rows[0]!.open).toBe(false);
    await pool.end();
  });
});
