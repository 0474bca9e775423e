import type pg from 'pg';

/** Runs `fn` in a transaction on a connection of `pool`: committed when it returns, rolled back when it throws. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * `pool` as it is, counting what goes through it: the text of each statement sent with `query`, and the connections
 * taken with `connect` (a transaction takes one). What a test of how many round trips a part makes reads.
 */
export function countingPool(pool: pg.Pool): { pool: pg.Pool; statements: string[]; connections: () => number } {
  const statements: string[] = [];
  let connections = 0;
  const counted = {
    query: (q: string | pg.QueryConfig, values?: unknown[]) => {
      statements.push(typeof q === 'string' ? q : q.text);
      return pool.query(q as pg.QueryConfig, values);
    },
    connect: () => {
      connections++;
      return pool.connect();
    },
  } as unknown as pg.Pool;
  return { pool: counted, statements, connections: () => connections };
}
