import pg from 'pg';

/** Anything that can run a query: the pool, or a client inside a transaction. Writes accept either. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// int8 (bigint, count(*)) as a JS number: every count this service reads is far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export function createPool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, application_name: 'workflow-alterations' });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Runs `fn` in one transaction on one client: COMMIT on success, ROLLBACK on any throw, and the client
 * always goes back to the pool.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
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
