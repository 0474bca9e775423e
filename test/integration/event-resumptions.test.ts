import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../../src/db/pool.js';
import { resumeRecorded, triggerEvent } from '../../src/engine/events.js';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { countingPool } from '../support/pools.js';
import { seedInstances } from '../support/seed.js';
import { chain, event, writeLine } from '../support/workflows.js';

/**
 * A trigger that reaches more instances than TRIGGER_INLINE_INSTANCES (10 here) records their resumption and
 * answers; the worker resumes them (src/engine/resumptions.ts, migration 014).
 */
const INLINE = 10;

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ config: { triggerInlineInstances: INLINE } });
  for (const [definitionId, eventName] of [
    ['resume-approval', 'approve'],
    ['resume-flood', 'flood'],
    ['resume-race', 'race'],
  ]) {
    const res = await h.request('POST', '/workflow-definitions', {
      body: chain(
        definitionId!,
        [writeLine('start', 'started'), event('wait', eventName!), writeLine('after', 'approved')],
        {
          variables: [{ id: 'note', name: 'Note', typeName: 'String', value: 'none' }],
        },
      ),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
});
afterAll(async () => {
  await h?.close();
});

async function read(id: string) {
  const res = await h.request('GET', `/workflow-instances/${id}`);
  expect(res.status).toBe(200);
  return res.body;
}

async function start(definitionId: string, correlationId: string): Promise<string> {
  const res = await h.request('POST', '/workflow-instances', { body: { definitionId, correlationId } });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.workflowInstanceId as string;
}

const recorded = async (eventName: string) =>
  (
    await h.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM instance_resumptions WHERE event_name = $1', [
      eventName,
    ])
  ).rows[0]!.n;

/** Instances of `ids` by status/sub-status, and their journal lines 'approved'. */
async function standing(ids: string[]) {
  const { rows } = await h.pool.query<{ state: string; n: number }>(
    `SELECT status || '/' || sub_status AS state, count(*)::int AS n FROM workflow_instances
      WHERE id = ANY($1::text[]) GROUP BY 1`,
    [ids],
  );
  const { rows: lines } = await h.pool.query<{ instance_id: string; n: number }>(
    `SELECT instance_id, count(*)::int AS n FROM journal_entries
      WHERE instance_id = ANY($1::text[]) AND message = 'approved' GROUP BY 1`,
    [ids],
  );
  return { states: Object.fromEntries(rows.map((r) => [r.state, r.n])), approved: lines };
}

/**
 * Runs `fn` with the worker stopped (the test runs the passes a worker would), then forgets the outbox rows of the
 * seeded instances it changed: they have no workflow, and thousands of them would keep the suite's Temporal busy.
 */
async function withoutWorker(ids: () => string[], fn: () => Promise<void>): Promise<void> {
  await h.stopWorker();
  try {
    await fn();
  } finally {
    await h.pool.query('DELETE FROM instance_outbox WHERE instance_id = ANY($1::text[])', [ids()]);
    await h.startWorker();
  }
}

describe('an event trigger over more instances than it resumes inline', () => {
  it('answers once their resumption is recorded; the worker resumes each once, and their workflows complete', async () => {
    // The worker stopped: nothing runs the recorded resumptions until it is back, so what the answer leaves is seen.
    await h.stopWorker();
    const ids: string[] = [];
    for (let i = 0; i < INLINE + 2; i++) ids.push(await start('resume-approval', `order-${i}`));

    const res = await h.request('POST', '/events/approve/trigger', { body: {} });
    expect(res.status).toBe(200);
    expect(res.headers.get('wfa-resumption')).toBe('recorded');
    expect(res.body.resumedWorkflowInstanceIds).toEqual(ids);
    expect(await recorded('approve')).toBe(ids.length);
    // Recorded, not yet run: each instance is still suspended on its bookmark.
    const before = await read(ids[0]!);
    expect([before.status, before.subStatus]).toEqual(['Running', 'Suspended']);
    expect(before.bookmarks).toEqual([{ activityId: 'wait', eventName: 'approve' }]);

    // A second trigger, of all or of one of them, finds their resumption recorded: nothing more, nothing listed.
    expect((await h.request('POST', '/events/approve/trigger', { body: {} })).body).toEqual({
      resumedWorkflowInstanceIds: [],
    });
    expect((await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: ids[3] } })).body).toEqual(
      { resumedWorkflowInstanceIds: [] },
    );
    expect(await recorded('approve')).toBe(ids.length);

    // Changed before the worker runs the resumption: one cancelled (it stays so), one given a note (kept).
    const run = await h.request('POST', '/alterations/run', {
      body: { alterations: [{ type: 'Cancel' }], workflowInstanceIds: [ids[1]] },
    });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    const note = await h.request('POST', '/alterations/run', {
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'note', value: 'kept' }],
        workflowInstanceIds: [ids[2]],
      },
    });
    expect(note.status, JSON.stringify(note.body)).toBe(200);

    await h.startWorker();
    const resumed = ids.filter((id) => id !== ids[1]);
    await eventually(
      async () => ((await standing(ids)).states['Finished/Finished'] === resumed.length ? true : undefined),
      'the recorded resumptions to run',
    );
    const after = await standing(ids);
    expect(after.states).toEqual({ 'Finished/Finished': resumed.length, 'Finished/Cancelled': 1 });
    // Each resumed instance ran its step after the event once; the cancelled one none.
    expect(after.approved.map((l) => [l.instance_id, l.n]).sort()).toEqual(resumed.map((id) => [id, 1]).sort());
    expect(await recorded('approve')).toBe(0);

    const done = await read(ids[2]!);
    expect(done.variables.find((v: any) => v.id === 'note').value).toBe('kept');
    expect(done.bookmarks).toEqual([]);
    expect(done.activityRecords.map((r: any) => [r.activityId, r.status])).toEqual([
      ['start', 'Completed'],
      ['wait', 'Completed'],
      ['after', 'Completed'],
    ]);
    const cancelled = await read(ids[1]!);
    expect(cancelled.journal.map((j: any) => j.message)).toEqual(['started']);

    // Temporal hears of the end: each instance's lifelong workflow closes, Completed or Canceled.
    for (const id of ids) {
      await eventually(
        async () => {
          const { status } = await h.client.workflow.getHandle(instanceWorkflowId(id)).describe();
          return status.name === (id === ids[1] ? 'CANCELLED' : 'COMPLETED') ? true : undefined;
        },
        `the workflow of ${id} to close`,
        30_000,
      );
    }
  }, 90_000);

  it("runs one tenant's resumptions while another tenant's flood waits: tenants in turn, not oldest first", async () => {
    let flood: string[] = [];
    let measured: string[] = [];
    await withoutWorker(
      () => [...flood, ...measured],
      async () => {
        const def = (await h.request('GET', '/workflow-definitions/resume-flood')).body;
        // The flood's definition is the default tenant's: seeded into two tenants by its version id.
        flood = await seedInstances(h.pool, {
          definitionVersionId: def.id,
          count: 6000,
          tenantId: 'flooder',
          bookmarks: [{ activityId: 'wait', eventName: 'flood' }],
        });
        measured = await seedInstances(h.pool, {
          definitionVersionId: def.id,
          count: 1500,
          tenantId: 'measured',
          bookmarks: [{ activityId: 'wait', eventName: 'flood' }],
        });
        const floodAnswer = await triggerEvent(h.pool, h.definitions, 'flooder', 'flood', {}, INLINE);
        const measuredAnswer = await triggerEvent(h.pool, h.definitions, 'measured', 'flood', {}, INLINE);
        expect([floodAnswer.queued, floodAnswer.resumedWorkflowInstanceIds.length]).toEqual([true, 6000]);
        expect([measuredAnswer.queued, measuredAnswer.resumedWorkflowInstanceIds.length]).toEqual([true, 1500]);

        // Passes as a worker runs them: the measured tenant's 1,500, recorded after the flood's 6,000, are all
        // resumed within three passes of 1,000 (half each), while oldest-first would run the whole flood first.
        let passes = 0;
        while ((await standing(measured)).states['Finished/Finished'] !== measured.length) {
          expect(await resumeRecorded(h.workerPool, h.definitions)).toBeGreaterThan(0);
          passes++;
        }
        const flooded = await standing(flood);
        expect(passes).toBe(3);
        expect(flooded.states['Running/Suspended']).toBe(6000 - 1500);
        // The flood runs on to its end, each instance once.
        while ((await resumeRecorded(h.workerPool, h.definitions)) > 0) passes++;
        const end = await standing(flood);
        expect(end.states).toEqual({ 'Finished/Finished': 6000 });
        expect(end.approved.every((l) => l.n === 1) && end.approved.length === 6000).toBe(true);
      },
    );
  }, 120_000);

  it('lists each instance once when recording and inline triggers of the event race, and resumes it once', async () => {
    let ids: string[] = [];
    await withoutWorker(
      () => ids,
      async () => {
        const def = (await h.request('GET', '/workflow-definitions/resume-race')).body;
        ids = await seedInstances(h.pool, {
          definitionVersionId: def.id,
          count: 3000,
          bookmarks: [{ activityId: 'wait', eventName: 'race' }],
        });
        // Two triggers over all (recording), one inline trigger per instance for 60 of them, and two workers'
        // passes running what the recording ones commit, all at once.
        let triggering = true;
        const drain = async () => {
          for (;;) {
            const taken = await resumeRecorded(h.workerPool, h.definitions, 500);
            if (taken > 0) continue;
            if (!triggering) return;
            // Nothing recorded yet: look again shortly, as a worker's drain does, not in a loop of statements that
            // leaves the triggers no time (an idle look is one statement without a transaction).
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        };
        const drains = [drain(), drain()];
        // The 62 triggers queue for 10 connections behind each other's row locks: on a busy machine a trigger may
        // wait longer for its connection than the API's 10 s bound, which is not what this test is about.
        const triggers = createPool(h.databaseUrl, { max: 10, acquireTimeoutMs: 120_000 });
        let answers: Awaited<ReturnType<typeof triggerEvent>>[];
        try {
          answers = await Promise.all([
            triggerEvent(triggers, h.definitions, '', 'race', {}, INLINE),
            ...ids
              .slice(1000, 1060)
              .map((id) => triggerEvent(triggers, h.definitions, '', 'race', { workflowInstanceId: id })),
            triggerEvent(triggers, h.definitions, '', 'race', {}, INLINE),
          ]);
        } finally {
          // The drains end with the triggers, whatever they came to: none outlives the test's pools.
          triggering = false;
          await Promise.allSettled(drains);
          await triggers.end();
        }
        await Promise.all(drains);
        const listed = answers.flatMap((a) => a.resumedWorkflowInstanceIds);
        expect(listed.length).toBe(ids.length);
        expect(new Set(listed).size).toBe(ids.length);
        const end = await standing(ids);
        expect(end.states).toEqual({ 'Finished/Finished': ids.length });
        expect(end.approved.length).toBe(ids.length);
        expect(end.approved.every((l) => l.n === 1)).toBe(true);
        expect(await recorded('race')).toBe(0);
      },
    );
  }, 90_000);

  it('looks, while none is recorded, in one statement and no transaction (ten times a second on every worker)', async () => {
    await eventually(
      async () =>
        (await h.pool.query('SELECT 1 FROM instance_resumptions LIMIT 1')).rowCount === 0 ? true : undefined,
      'no resumption recorded',
    );
    const counting = countingPool(h.workerPool);
    expect(await resumeRecorded(counting.pool, h.definitions)).toBe(0);
    expect(counting.connections()).toBe(0);
    expect(counting.statements).toHaveLength(1);
  });
});
