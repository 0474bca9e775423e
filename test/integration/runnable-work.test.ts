import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  hasRunnableWork,
  INSTANCE_COLUMNS,
  instanceFromRow,
  type InstanceRow,
  runnableWorkSql,
} from '../../src/engine/instance-state.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ worker: false });
});
afterAll(() => h?.close());

describe('the runnable-work rule', () => {
  it('reads the same in TypeScript and in SQL for every combination of status, sub-status and schedule', async () => {
    const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('runnable') });
    const ids: string[] = [];
    for (const [status, subStatus] of [
      ['Running', 'Pending'],
      ['Running', 'Executing'],
      ['Running', 'Suspended'],
      ['Running', 'Faulted'],
      ['Finished', 'Finished'],
      ['Finished', 'Cancelled'],
    ]) {
      ids.push(...(await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 2, subStatus })));
      await h.pool.query('UPDATE workflow_instances SET status = $2 WHERE id = ANY($1::text[])', [
        ids.slice(-2),
        status,
      ]);
      // One of each pair has something scheduled.
      await h.pool.query(`UPDATE workflow_instances SET scheduled = '["start"]' WHERE id = $1`, [ids[ids.length - 1]]);
    }
    const { rows } = await h.pool.query<InstanceRow & { runnable: boolean }>(
      `SELECT ${INSTANCE_COLUMNS}, ${runnableWorkSql('i')} AS runnable FROM workflow_instances i WHERE id = ANY($1::text[])`,
      [ids],
    );
    expect(rows).toHaveLength(12);
    for (const row of rows)
      expect(row.runnable, `${row.status}/${row.sub_status}`).toBe(hasRunnableWork(instanceFromRow(row)));
    expect(rows.filter((r) => r.runnable)).toHaveLength(3);
  });
});
