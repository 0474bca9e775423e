import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resumeRecorded, triggerEvent } from '../../src/engine/events.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { connect, event, flowchart, writeLine } from '../support/workflows.js';

/**
 * The migration the issue could not do before activity mappings: 10,000 suspended instances wait in `wait`,
 * and version 2 renamed it `await-approval`. Without a mapping every job fails and nothing changes; with the
 * drafted mapping every instance moves, its record follows, and the event then runs version 2's next step.
 */
const COUNT = 10_000;
const DEFINITION = 'renamed-wait';

let h: Harness;
let ids: string[] = [];

const version = (n: number, waitId: string) =>
  flowchart(
    DEFINITION,
    [
      writeLine('start', 'started'),
      { ...event(waitId, 'approve'), name: 'Wait for approval' },
      writeLine('after', `approved in version ${n}`),
    ],
    [connect('start', waitId), connect(waitId, 'after')],
  );

async function runPlan(id: string, alterations: unknown[]) {
  const r = await h.request('POST', '/alterations/submit', {
    body: { id, alterations, filter: { definitionIds: [DEFINITION] } },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return eventually(
    async () => {
      const plan = (await h.request('GET', `/alterations/${id}`)).body.plan;
      return plan?.status === 4 ? plan : undefined;
    },
    `plan ${id} to complete`,
    120_000,
  );
}

async function where() {
  const { rows } = await h.pool.query<{ version: number; waits: string; n: number }>(
    `SELECT version, bookmarks -> 0 ->> 'activityId' AS waits, count(*)::int AS n FROM workflow_instances
      WHERE id = ANY($1::text[]) GROUP BY 1, 2 ORDER BY 1, 2`,
    [ids],
  );
  return rows;
}

async function records() {
  const { rows } = await h.pool.query<{ activity_id: string; status: string; n: number }>(
    `SELECT activity_id, status, count(*)::int AS n FROM activity_records
      WHERE instance_id = ANY($1::text[]) GROUP BY 1, 2 ORDER BY 1, 2`,
    [ids],
  );
  return rows;
}

beforeAll(async () => {
  h = await createHarness({ config: { triggerInlineInstances: 10 } });
  const v1 = await h.request('POST', '/workflow-definitions', { body: version(1, 'wait') });
  expect(v1.status, JSON.stringify(v1.body)).toBe(201);
  ids = await seedInstances(h.pool, { definitionVersionId: v1.body.id, count: COUNT });
  // As if each had run to its wait: the wait's record Running.
  await h.pool.query(
    `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, started_at)
     SELECT id, tenant_id, 'wait', 'flow1:wait', 'Elsa.Event', 'Wait for approval', 'Running', now()
       FROM workflow_instances WHERE id = ANY($1::text[])`,
    [ids],
  );
  const v2 = await h.request('POST', '/workflow-definitions', { body: version(2, 'await-approval') });
  expect(v2.status, JSON.stringify(v2.body)).toBe(201);
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('a migration of 10,000 instances whose waiting activity was renamed', () => {
  it('fails every job with the reason, and changes no instance, without a mapping', async () => {
    const plan = await runPlan('unmapped', [{ type: 'Migrate', targetVersion: 2 }]);
    expect(plan.jobCounts).toMatchObject({ total: COUNT, failed: COUNT, completed: 0 });
    const failed = await h.request('GET', '/alterations/unmapped/jobs?status=Failed&limit=1');
    expect(failed.body.items[0].log.at(-1).message).toBe('Activity wait does not exist in version 2');
    expect(await where()).toEqual([{ version: 1, waits: 'wait', n: COUNT }]);
    expect(await records()).toEqual([{ activity_id: 'wait', status: 'Running', n: COUNT }]);
  }, 180_000);

  it('refuses a mapping onto an activity of another type: the job names both, the instance stays', async () => {
    const r = await h.request('POST', '/alterations/run', {
      body: {
        alterations: [{ type: 'Migrate', targetVersion: 2, activityMappings: [{ source: 'wait', target: 'after' }] }],
        workflowInstanceIds: ids.slice(0, 2),
      },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    for (const result of r.body.results) {
      expect(result.isSuccessful).toBe(false);
      expect(result.log.at(-1).message).toBe(
        'Activity wait (Elsa.Event) cannot be carried to after (Elsa.WriteLine) in version 2: an activity is carried only to one of its own type',
      );
    }
    expect(await where()).toEqual([{ version: 1, waits: 'wait', n: COUNT }]);
  });

  it('refuses to carry a wait onto another type under the same id, alone or as the first of two Migrates', async () => {
    // Version 3: `wait` is now a WriteLine, `await-approval` the Event.
    const v3 = await h.request('POST', '/workflow-definitions', {
      body: flowchart(
        DEFINITION,
        [writeLine('start', 'started'), writeLine('wait', 'not a wait'), event('await-approval', 'approve')],
        [connect('start', 'wait'), connect('wait', 'await-approval')],
      ),
    });
    expect(v3.status, JSON.stringify(v3.body)).toBe(201);
    const typeChange =
      'Activity wait (Elsa.Event) cannot be carried to wait (Elsa.WriteLine) in version 3: an activity is carried only to one of its own type';
    for (const alterations of [
      [{ type: 'Migrate', targetVersion: 3 }],
      [
        { type: 'Migrate', targetVersion: 3 },
        { type: 'Migrate', targetVersion: 2, activityMappings: [{ source: 'wait', target: 'await-approval' }] },
      ],
    ]) {
      const r = await h.request('POST', '/alterations/run', {
        body: { alterations, workflowInstanceIds: ids.slice(0, 2) },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      for (const result of r.body.results) {
        expect(result.isSuccessful).toBe(false);
        expect(result.log.at(-1).message).toBe(typeChange);
      }
    }
    expect(await where()).toEqual([{ version: 1, waits: 'wait', n: COUNT }]);
  });

  it('moves every instance with the drafted mapping; the event then runs version 2', async () => {
    const draft = await h.request('GET', `/workflow-definitions/${DEFINITION}/migration-draft?from=1&to=2`);
    expect(draft.status).toBe(200);
    expect(draft.body).toEqual({
      definitionId: DEFINITION,
      from: 1,
      to: 2,
      mappings: [
        { source: 'start', target: 'start', reason: 'sameId' },
        { source: 'wait', target: 'await-approval', reason: 'sameTypeAndName' },
        { source: 'after', target: 'after', reason: 'sameId' },
      ],
      unmapped: [],
    });
    const activityMappings = draft.body.mappings.map(({ source, target }: { source: string; target: string }) => ({
      source,
      target,
    }));
    const plan = await runPlan('mapped', [{ type: 'Migrate', targetVersion: 2, activityMappings }]);
    expect(plan.jobCounts).toMatchObject({ total: COUNT, completed: COUNT, failed: 0 });
    expect(await where()).toEqual([{ version: 2, waits: 'await-approval', n: COUNT }]);
    expect(await records()).toEqual([
      { activity_id: 'await-approval', status: 'Running', n: COUNT },
      { activity_id: 'wait', status: 'Canceled', n: COUNT },
    ]);

    // The event: recorded (more than 10), run by passes as the worker runs them; the worker stopped so that
    // the 10,000 seeded instances get no Temporal workflow each.
    await h.stopWorker();
    try {
      const answer = await triggerEvent(h.pool, h.definitions, '', 'approve', {}, 10);
      expect(answer.resumedWorkflowInstanceIds.length).toBe(COUNT);
      while ((await resumeRecorded(h.workerPool, h.definitions)) > 0);
    } finally {
      await h.pool.query('DELETE FROM instance_outbox WHERE instance_id = ANY($1::text[])', [ids]);
      await h.startWorker();
    }
    const { rows } = await h.pool.query<{ status: string; n: number; v2: number }>(
      `SELECT i.status, count(*)::int AS n,
              count(*) FILTER (WHERE EXISTS (SELECT 1 FROM journal_entries j WHERE j.instance_id = i.id
                                               AND j.message = 'approved in version 2'))::int AS v2
         FROM workflow_instances i WHERE i.id = ANY($1::text[]) GROUP BY 1`,
      [ids],
    );
    expect(rows).toEqual([{ status: 'Finished', n: COUNT, v2: COUNT }]);
  }, 300_000);
});
