import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, requestPool } from '../../src/db/pool.js';
import { createHarness, type Harness } from '../support/harness.js';

/**
 * A request's view of the pool (src/db/pool.ts `requestPool`) cancels its statements on the server when the
 * client goes away, by the session's id as the server reads it.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(() => h?.close());

describe("a request's statements", () => {
  it("are cancelled when the client goes away, by the server's id of the session, not the start-up message's", async () => {
    const pool = createPool(h.databaseUrl, 2);
    const gone = new AbortController();
    const client = await requestPool(pool, gone.signal).connect();
    // Behind a pooler the id the start-up message gives is the pooler's key, no server process's (here: init's).
    (client as unknown as { processID: number }).processID = 1;
    const t0 = performance.now();
    const statement = client.query('SELECT pg_sleep(20)').catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 300));
    gone.abort();
    const outcome = await statement;
    expect((outcome as { code?: string }).code).toBe('57014');
    expect(performance.now() - t0).toBeLessThan(10_000);
    client.release();
    await pool.end();
  });
});
