import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTransientError } from '../../src/db/errors.js';
import { createPool } from '../../src/db/pool.js';
import { createHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(() => h?.close());

describe('a pool whose connection dies under a checked-out client', () => {
  it('does not crash the process: the next statement fails as transient and the pool carries on', async () => {
    const pool = createPool(h.databaseUrl, 2);
    const client = await pool.connect();
    await client.query('BEGIN');
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    // As an immediate restart of Postgres does to a worker mid-transaction, between two statements.
    await h.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await new Promise((r) => setTimeout(r, 500));
    const failed = await client.query('SELECT 1').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(Error);
    expect(isTransientError(failed)).toBe(true);
    client.release(true);
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
    await pool.end();
  });
});
