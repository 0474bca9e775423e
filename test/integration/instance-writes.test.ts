import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { lockInstance, saveInstance, writeInstanceStates } from '../../src/engine/instance-state.js';
import { createHarness, type Harness } from '../support/harness.js';
import { inTransaction } from '../support/pools.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * A step writes its one instance back by its primary key, whatever the size of the table: the planner once chose to
 * read every instance to find it (a hash join with `jsonb_to_recordset`, of which it expects 100 rows), the most of
 * a step's write-back in a table of a few thousand instances. Real Postgres; what Postgres itself counted, within
 * the transaction (`pg_stat_xact_user_tables`).
 */
let h: Harness;
let ids: string[];

beforeAll(async () => {
  h = await createHarness({ worker: false });
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('writes-def') });
  ids = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 3_000, namePrefix: 'writes-' });
  await h.pool.query('ANALYZE workflow_instances');
}, 60_000);
afterAll(() => h?.close());

/** What this transaction has done to workflow_instances so far, as Postgres counts it. */
async function scans(client: pg.PoolClient): Promise<{ seq: number; idx: number; upd: number }> {
  const { rows } = await client.query<{ seq: string; idx: string; upd: string }>(
    `SELECT seq_scan AS seq, coalesce(idx_scan, 0) AS idx, n_tup_upd AS upd
       FROM pg_stat_xact_user_tables WHERE relname = 'workflow_instances'`,
  );
  return { seq: Number(rows[0]!.seq), idx: Number(rows[0]!.idx), upd: Number(rows[0]!.upd) };
}

describe("an instance's write-back", () => {
  it('finds its one row by the primary key, reading no other instance', async () => {
    const id = ids[1_234]!;
    const counted = await inTransaction(h.pool, async (client) => {
      const s = (await lockInstance(client, id))!;
      s.variables = { ...s.variables, note: 'written back' };
      const before = await scans(client);
      await saveInstance(client, s);
      const after = await scans(client);
      return { seq: after.seq - before.seq, idx: after.idx - before.idx, upd: after.upd - before.upd };
    });
    expect(counted).toEqual({ seq: 0, idx: 1, upd: 1 });
    const { rows } = await h.pool.query(`SELECT variables ->> 'note' AS note FROM workflow_instances WHERE id = $1`, [
      id,
    ]);
    expect(rows[0].note).toBe('written back');
  });

  it('still writes many instances in one statement', async () => {
    const some = [ids[10]!, ids[2_000]!, ids[2_999]!];
    const written = await inTransaction(h.pool, async (client) => {
      const states = [];
      for (const id of some) {
        const s = (await lockInstance(client, id))!;
        s.variables = { ...s.variables, note: 'many' };
        states.push(s);
      }
      return writeInstanceStates(client, states);
    });
    expect(written).toBe(3);
    const { rows } = await h.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND variables ->> 'note' = 'many'`,
      [some],
    );
    expect(Number(rows[0]!.n)).toBe(3);
  });
});
