import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { chain, event, writeLine } from '../support/workflows.js';

let h: Harness;
let versionId: string;

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 10, window: 2, batchesPerRun: 50 } });
  const def = await h.request('POST', '/workflow-definitions', {
    body: chain('durable', [writeLine('start', 'started'), event('wait', 'approve')], {
      variables: [
        { id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 },
        { id: 'note', name: 'Note', typeName: 'String' },
      ],
    }),
  });
  versionId = def.body.id;
  // Counts every write of every instance row: the plan's effect on each instance, measured, not assumed.
  await h.pool.query(`
    CREATE TABLE instance_writes (instance_id text NOT NULL);
    CREATE FUNCTION record_instance_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO instance_writes VALUES (NEW.id); RETURN NEW; END $$;
    CREATE TRIGGER record_instance_write AFTER UPDATE ON workflow_instances FOR EACH ROW EXECUTE FUNCTION record_instance_write();
  `);
});
afterAll(() => h?.close());

async function planStatus(planId: string) {
  return (await h.request('GET', `/alterations/${planId}`)).body.plan as {
    status: number;
    jobCounts: { completed: number; pending: number };
  };
}

async function writesPerInstance(ids: string[]) {
  const { rows } = await h.pool.query<{ instance_id: string; n: number }>(
    'SELECT instance_id, count(*)::int AS n FROM instance_writes WHERE instance_id = ANY($1::text[]) GROUP BY 1',
    [ids],
  );
  return new Map(rows.map((r) => [r.instance_id, r.n]));
}

describe('plan durability', () => {
  it('finishes a plan whose worker is stopped midway, every instance altered exactly once', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 1200,
      variables: { amount: 0 },
      namePrefix: 'crash-',
    });
    const submit = await h.request('POST', '/alterations/submit', {
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
        filter: { searchTerm: 'crash-' },
      },
    });
    const planId = submit.body.planId as string;
    await eventually(
      async () => ((await planStatus(planId)).jobCounts.completed >= 200 ? true : undefined),
      'the plan to make progress',
    );
    await h.stopWorker();
    const stoppedAt = await planStatus(planId);
    expect(stoppedAt.status).toBe(3);
    expect(stoppedAt.jobCounts.pending).toBeGreaterThan(0);

    await h.startWorker();
    await eventually(
      async () => ((await planStatus(planId)).status === 4 ? true : undefined),
      'the plan to complete on the new worker',
      90_000,
    );

    // A Completed job stores no log of its own (every alteration succeeded; the API derives the entries).
    const { rows: jobs } = await h.pool.query<{ instance_id: string; status: number; stored_log: boolean }>(
      'SELECT instance_id, status, log IS NOT NULL AS stored_log FROM alteration_jobs WHERE plan_id = $1',
      [planId],
    );
    expect(jobs).toHaveLength(1200);
    expect(new Set(jobs.map((j) => j.instance_id))).toEqual(new Set(ids));
    expect(jobs.filter((j) => j.status !== 2 || j.stored_log)).toEqual([]);
    const page = await h.request('GET', `/alterations/${planId}/jobs?limit=1000`);
    expect(page.body.items.every((j: { log: unknown[] }) => j.log.length === 1)).toBe(true);
    expect((await planStatus(planId)).jobCounts).toMatchObject({ total: 1200, completed: 1200, pending: 0 });
    const writes = await writesPerInstance(ids);
    expect(ids.filter((id) => writes.get(id) !== 1)).toEqual([]);
    const { rows } = await h.pool.query(
      "SELECT count(*)::int AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND variables->>'amount' = '1'",
      [ids],
    );
    expect(rows[0].n).toBe(1200);
    // Batches of 10 through Temporal, a worker stopped and started: its own bound, past the suite's 60 s.
  }, 180_000);

  it('loses no update when two plans alter the same instances at once', async () => {
    const ids = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 600,
      variables: { amount: 0 },
      namePrefix: 'both-',
    });
    const [a, b] = await Promise.all([
      h.request('POST', '/alterations/submit', {
        body: {
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
          filter: { searchTerm: 'both-' },
        },
      }),
      h.request('POST', '/alterations/submit', {
        body: {
          alterations: [{ type: 'ModifyVariable', variableId: 'note', value: 'b' }],
          filter: { searchTerm: 'both-' },
        },
      }),
    ]);
    for (const r of [a, b]) {
      await eventually(
        async () => ((await planStatus(r.body.planId)).status === 4 ? true : undefined),
        'both plans to complete',
        60_000,
      );
      expect((await planStatus(r.body.planId)).jobCounts).toMatchObject({ total: 600, completed: 600 });
    }
    const { rows } = await h.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND variables->>'amount' = '5' AND variables->>'note' = 'b'",
      [ids],
    );
    expect(rows[0]!.n).toBe(600);
    const writes = await writesPerInstance(ids);
    expect(ids.filter((id) => writes.get(id) !== 2)).toEqual([]);
  });
});
