import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockInstanceAndRecord } from '../../src/engine/instance-state.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances, withoutWorkflows } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * The last part of an outbound call locks its instance and its activity record in one statement
 * (`lockInstanceAndRecord`). It must take them in the order every other writer of both takes them, the instance
 * first: a change that holds the instance and then writes the record (a Cancel, a revert) would otherwise
 * deadlock with it. Real Postgres, three connections.
 */
let h: Harness;
let instanceId: string;
let recordId: string;
/** A Running record of another instance. */
let othersRecordId: string;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('locks-def') });
  instanceId = (await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1 }))[0]!;
  const { rows } = await withoutWorkflows<{ id: string }>(
    h.pool,
    `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, status, started_at)
     VALUES ($1, '', 'call', 'flow1:call', 'Elsa.Http.SendHttpRequest', 'Running', now()) RETURNING id::text`,
    [instanceId],
  );
  recordId = rows[0]!.id;
  const other = (await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1 }))[0]!;
  const { rows: others } = await withoutWorkflows<{ id: string }>(
    h.pool,
    `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, status, started_at)
     VALUES ($1, '', 'call', 'flow1:call', 'Elsa.Http.SendHttpRequest', 'Running', now()) RETURNING id::text`,
    [other],
  );
  othersRecordId = others[0]!.id;
});
afterAll(() => h?.close());

/** Whether another transaction can row-lock `sql`'s row at once (NOWAIT): false while a lock is held on it. */
async function free(sql: string, params: unknown[]): Promise<boolean> {
  const client = await h.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`${sql} FOR UPDATE NOWAIT`, params);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') return false;
    throw err;
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}
const instanceFree = () => free('SELECT id FROM workflow_instances WHERE id = $1', [instanceId]);
const recordFree = () => free('SELECT id FROM activity_records WHERE id = $1', [recordId]);

describe('lockInstanceAndRecord', () => {
  it('reads the instance and its record, and holds both rows locked until the transaction ends', async () => {
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      const { s, recordStatus } = await lockInstanceAndRecord(client, instanceId, recordId);
      expect(s?.id).toBe(instanceId);
      expect(s?.callsInFlight).toEqual(['call']);
      expect(recordStatus).toBe('Running');
      expect(await instanceFree()).toBe(false);
      expect(await recordFree()).toBe(false);
      await client.query('COMMIT');
      expect(await instanceFree()).toBe(true);
      expect(await recordFree()).toBe(true);
      // A record of another instance, or none: no status; an instance that is gone: neither.
      await client.query('BEGIN');
      expect((await lockInstanceAndRecord(client, instanceId, '999999999')).recordStatus).toBeUndefined();
      expect((await lockInstanceAndRecord(client, instanceId, othersRecordId)).recordStatus).toBeUndefined();
      expect(await lockInstanceAndRecord(client, 'no-such-instance', recordId)).toEqual({
        s: undefined,
        recordStatus: undefined,
      });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });

  it('takes the instance before the record: waiting for a record another change holds, it already holds the instance', async () => {
    const holder = await h.pool.connect();
    const locker = await h.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM activity_records WHERE id = $1 FOR UPDATE', [recordId]);
      await locker.query('BEGIN');
      const locked = lockInstanceAndRecord(locker, instanceId, recordId);
      // The locker waits for the record; the instance must be locked by then (record-first would leave it free).
      let waiting = false;
      for (let i = 0; i < 100 && !waiting; i++) {
        const { rows } = await h.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE NOT l.granted AND a.query LIKE 'WITH i AS MATERIALIZED%'`,
        );
        waiting = rows[0]!.n > 0;
        if (!waiting) await new Promise((r) => setTimeout(r, 20));
      }
      expect(waiting).toBe(true);
      expect(await instanceFree()).toBe(false);
      await holder.query('COMMIT');
      expect((await locked).recordStatus).toBe('Running');
      await locker.query('COMMIT');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await locker.query('ROLLBACK').catch(() => undefined);
      holder.release();
      locker.release();
    }
  });
});
