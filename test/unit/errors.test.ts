import net from 'node:net';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { isTransientError, SQLSTATE, sqlState } from '../../src/db/errors.js';
import { createLogger } from '../../src/logger.js';
import { Writable } from 'node:stream';

/** Errors as node-postgres really raises them, against the test server. */
async function errorFrom(sql: string, params: unknown[] = []): Promise<unknown> {
  const client = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await client.connect();
  try {
    await client.query(sql, params);
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await client.end();
  }
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

describe('which failures are worth retrying', () => {
  it('never retries bad data, constraint violations, wrong queries or bugs', async () => {
    const outOfRange = await errorFrom('SELECT $1::int', ['2147483648']);
    expect(sqlState(outOfRange)).toBe('22003');
    expect(isTransientError(outOfRange)).toBe(false);
    const badTimestamp = await errorFrom("SELECT '0000-01-01T00:00:00Z'::timestamptz");
    expect(sqlState(badTimestamp)?.slice(0, 2)).toBe('22');
    expect(isTransientError(badTimestamp)).toBe(false);
    const unique = await errorFrom('CREATE TEMP TABLE t (x int PRIMARY KEY); INSERT INTO t VALUES (1), (1)');
    expect(sqlState(unique)).toBe(SQLSTATE.uniqueViolation);
    expect(isTransientError(unique)).toBe(false);
    expect(isTransientError(await errorFrom('SELECT * FROM no_such_table'))).toBe(false);
    expect(isTransientError(new TypeError("Cannot read properties of undefined (reading 'x')"))).toBe(false);
  });

  it('retries an unreachable database, a pool with no connection in time and a serialization failure', async () => {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: await closedPort(),
      user: 'x',
      connectionTimeoutMillis: 2000,
    });
    const refused = await client.connect().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isTransientError(refused)).toBe(true);

    const pool = new pg.Pool({ connectionString: inject('pgAdminUrl'), max: 1, connectionTimeoutMillis: 200 });
    const held = await pool.connect();
    const timeout = await pool.connect().then(
      (c) => c.release(),
      (err: unknown) => err,
    );
    held.release();
    await pool.end();
    expect(timeout).toBeInstanceOf(Error);
    expect(isTransientError(timeout)).toBe(true);

    const serialization = Object.assign(new Error('could not serialize access'), {
      code: SQLSTATE.serializationFailure,
    });
    expect(isTransientError(serialization)).toBe(true);
    expect(isTransientError(new Error('wrapped', { cause: serialization }))).toBe(true);
  });
});

describe('error log lines', () => {
  it('carry the message, the stack and the cause, under err or error', () => {
    const lines: Record<string, any>[] = [];
    const logger = createLogger(
      'info',
      new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(JSON.parse(chunk.toString())), cb()) }),
    );
    logger.error({ err: new Error('outer', { cause: new RangeError('inner') }) }, 'failed');
    logger.error({ error: new TypeError('boom') }, 'failed too');
    expect(lines[0]!.err).toMatchObject({
      type: 'Error',
      message: 'outer',
      cause: { type: 'RangeError', message: 'inner' },
    });
    expect(lines[0]!.err.stack).toMatch(/at /);
    expect(lines[1]!.error).toMatchObject({ type: 'TypeError', message: 'boom' });
    expect(lines[1]!.error.stack).toMatch(/at /);
  });
});
