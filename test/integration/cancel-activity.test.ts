import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLAN_TYPES_ATTRIBUTE } from '../../workflows/search-attributes.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { approvalWithNote, connect, event, writeLine } from '../support/workflows.js';

/**
 * The CancelActivity alteration (contract section 4) on real Postgres and Temporal: through run, plans,
 * preview and revert.
 */
let h: Harness;

const ok = (type: string) => ({
  message: `${type} succeeded`,
  logLevel: 2,
  timestamp: expect.any(String),
  eventName: `Alteration ${type} succeeded`,
});
const failed = (type: string, message: string) => ({
  message,
  logLevel: 4,
  timestamp: expect.any(String),
  eventName: `Alteration ${type} failed`,
});

/** Writes "started", then waits on two events at once: "left" (then writes "left done") and "right". */
const twoBranches = {
  definitionId: 'two-branches',
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [
      writeLine('start', 'started'),
      event('waitLeft', 'left'),
      event('waitRight', 'right'),
      writeLine('leftDone', 'left done'),
      writeLine('rightDone', 'right done'),
    ],
    connections: [
      connect('start', 'waitLeft'),
      connect('start', 'waitRight'),
      connect('waitLeft', 'leftDone'),
      connect('waitRight', 'rightDone'),
    ],
  },
};

interface Instance {
  status: string;
  subStatus: string;
  bookmarks: { activityId: string; eventName: string }[];
  scheduledActivityIds: string[];
  activityRecords: { activityId: string; status: string; completedAt: string | null }[];
  journal: { message: string }[];
  finishedAt: string | null;
  [key: string]: unknown;
}

async function instance(id: string): Promise<Instance> {
  const r = await h.request('GET', `/workflow-instances/${id}`);
  expect(r.status).toBe(200);
  return r.body;
}

async function until(id: string, subStatus: string) {
  return eventually(async () => {
    const i = await instance(id);
    return i.subStatus === subStatus ? i : undefined;
  }, `instance ${id} to be ${subStatus}`);
}

async function suspended(definitionId = 'cancel-approval') {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  expect(r.status).toBe(202);
  const id = r.body.workflowInstanceId as string;
  const i = await until(id, 'Suspended');
  // Both branches of two-branches wait before the instance counts as suspended on both.
  if (definitionId === 'two-branches') expect(i.bookmarks).toHaveLength(2);
  return id;
}

const records = (i: Instance) => i.activityRecords.map((r) => `${r.activityId}:${r.status}`);

const run = (workflowInstanceIds: string[], alterations: unknown[]) =>
  h.request('POST', '/alterations/run', { body: { alterations, workflowInstanceIds } });

const trigger = async (eventName: string, workflowInstanceId: string) =>
  (await h.request('POST', `/events/${eventName}/trigger`, { body: { workflowInstanceId } })).body
    .resumedWorkflowInstanceIds as string[];

async function submit(body: Record<string, unknown>): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', { body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

async function revert(planId: string, id?: string): Promise<string> {
  const r = await h.request('POST', `/alterations/${planId}/revert`, { body: id ? { id } : {} });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

async function completed(planId: string) {
  return eventually(async () => {
    const r = await h.request('GET', `/alterations/${planId}`);
    return r.body.plan?.status === 4 ? r.body : undefined;
  }, `plan ${planId} to complete`);
}

beforeAll(async () => {
  h = await createHarness();
  for (const body of [approvalWithNote('cancel-approval', 'approved'), twoBranches]) {
    const r = await h.request('POST', '/workflow-definitions', { body });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
});
afterAll(() => h?.close());

describe('CancelActivity through POST /alterations/run', () => {
  it('removes the bookmark, cancels the running record and finishes an instance with nothing else waiting', async () => {
    const id = await suspended();
    const r = await run([id], [{ type: 'CancelActivity', activityId: 'wait' }]);
    expect(r.status).toBe(200);
    expect(r.body.results).toEqual([
      { workflowInstanceId: id, isSuccessful: true, workflowHasScheduledWork: false, log: [ok('CancelActivity')] },
    ]);
    const i = await instance(id);
    expect(i).toMatchObject({ status: 'Finished', subStatus: 'Finished', bookmarks: [], scheduledActivityIds: [] });
    expect(i.finishedAt).not.toBeNull();
    expect(records(i)).toEqual(['start:Completed', 'wait:Canceled']);
    expect(i.activityRecords[1]!.completedAt).not.toBeNull();
    // As if "wait" had ended without an outcome: "done" never runs, and the event resumes nothing.
    expect(i.journal.map((j) => j.message)).toEqual(['started']);
    expect(await trigger('approve', id)).toEqual([]);
  });

  it('leaves an instance with another branch waiting Suspended, which then goes on from that branch', async () => {
    const id = await suspended('two-branches');
    const r = await run([id], [{ type: 'CancelActivity', activityId: 'waitLeft' }]);
    expect(r.body.results[0]).toMatchObject({ isSuccessful: true, log: [ok('CancelActivity')] });
    const i = await instance(id);
    expect(i).toMatchObject({
      status: 'Running',
      subStatus: 'Suspended',
      bookmarks: [{ activityId: 'waitRight', eventName: 'right' }],
      finishedAt: null,
    });
    expect(records(i).sort()).toEqual(['start:Completed', 'waitLeft:Canceled', 'waitRight:Running']);

    expect(await trigger('left', id)).toEqual([]);
    expect(await trigger('right', id)).toEqual([id]);
    const done = await until(id, 'Finished');
    expect(done.journal.map((j) => j.message)).toEqual(['started', 'right done']);
    expect(records(done).sort()).toEqual([
      'rightDone:Completed',
      'start:Completed',
      'waitLeft:Canceled',
      'waitRight:Completed',
    ]);
  });

  it('removes scheduled work of the activity, and closes only the record it had when scheduled again', async () => {
    const id = await suspended();
    // Scheduled, then cancelled in the same job: the note never runs; the instance still waits.
    const r = await run(
      [id],
      [
        { type: 'ScheduleActivity', activityId: 'note' },
        { type: 'CancelActivity', activityId: 'note' },
      ],
    );
    expect(r.body.results[0]).toEqual({
      workflowInstanceId: id,
      isSuccessful: true,
      workflowHasScheduledWork: false,
      log: [ok('ScheduleActivity'), ok('CancelActivity')],
    });
    let i = await instance(id);
    expect(i).toMatchObject({ subStatus: 'Suspended', scheduledActivityIds: [] });
    expect(i.journal.map((j) => j.message)).toEqual(['started']);

    // Cancelled, then scheduled again: the old wait is Canceled, the new one waits (Running).
    const again = await run(
      [id],
      [
        { type: 'CancelActivity', activityId: 'wait' },
        { type: 'ScheduleActivity', activityId: 'wait' },
      ],
    );
    expect(again.body.results[0]).toMatchObject({ isSuccessful: true });
    i = await until(id, 'Suspended');
    expect(i.bookmarks).toEqual([{ activityId: 'wait', eventName: 'approve' }]);
    expect(records(i)).toEqual(['start:Completed', 'wait:Canceled', 'wait:Running']);
  });

  it('settles after the whole job, so one job moves an instance from one activity to another', async () => {
    for (const order of ['cancel first', 'schedule first']) {
      const id = await suspended();
      const cancel = { type: 'CancelActivity', activityId: 'wait' };
      const schedule = { type: 'ScheduleActivity', activityId: 'note' };
      const r = await run([id], order === 'cancel first' ? [cancel, schedule] : [schedule, cancel]);
      expect(r.body.results[0], order).toMatchObject({ isSuccessful: true, workflowHasScheduledWork: true });
      // The note runs, and with nothing left scheduled or waiting the instance finishes.
      const done = await until(id, 'Finished');
      expect(
        done.journal.map((j) => j.message),
        order,
      ).toEqual(['started', 'note written']);
      expect(records(done), order).toEqual(['start:Completed', 'wait:Canceled', 'note:Completed']);
    }
  });

  it('fails for an unknown activity, one neither scheduled nor waiting, and a finished instance', async () => {
    const id = await suspended();
    const before = await instance(id);
    const unknown = await run([id], [{ type: 'CancelActivity', activityId: 'ghost' }]);
    expect(unknown.body.results[0]).toEqual({
      workflowInstanceId: id,
      isSuccessful: false,
      workflowHasScheduledWork: false,
      log: [failed('CancelActivity', 'Activity with ID ghost not found')],
    });
    const idle = await run([id], [{ type: 'CancelActivity', activityId: 'done' }]);
    expect(idle.body.results[0].log).toEqual([failed('CancelActivity', 'Activity done is not scheduled or waiting')]);
    // A completed activity is not waiting either.
    const ran = await run([id], [{ type: 'CancelActivity', activityId: 'start' }]);
    expect(ran.body.results[0].log).toEqual([failed('CancelActivity', 'Activity start is not scheduled or waiting')]);
    expect(await instance(id)).toEqual(before);

    await run([id], [{ type: 'Cancel' }]);
    const finished = await run([id], [{ type: 'CancelActivity', activityId: 'wait' }]);
    expect(finished.body.results[0].log).toEqual([failed('CancelActivity', `Workflow instance ${id} is finished`)]);
  });

  it('is atomic: a later failing alteration leaves the instance and its records exactly as they were', async () => {
    const id = await suspended();
    const before = await instance(id);
    const r = await run(
      [id],
      [
        { type: 'CancelActivity', activityId: 'wait' },
        { type: 'ModifyVariable', variableId: 'missing', value: 1 },
      ],
    );
    expect(r.body.results[0]).toEqual({
      workflowInstanceId: id,
      isSuccessful: false,
      workflowHasScheduledWork: false,
      log: [ok('CancelActivity'), failed('ModifyVariable', 'Variable with ID missing not found')],
    });
    expect(await instance(id)).toEqual(before);
    expect(records(before)).toEqual(['start:Completed', 'wait:Running']);
  });

  it('is validated: activityId is required, unknown properties are refused, and the OpenAPI document lists it', async () => {
    for (const [alteration, path] of [
      [{ type: 'CancelActivity' }, '/alterations/0/activityId'],
      [{ type: 'CancelActivity', activityId: '' }, '/alterations/0/activityId'],
      [{ type: 'CancelActivity', activityId: 'wait', extra: 1 }, '/alterations/0/extra'],
    ] as const) {
      const r = await run(['x'], [alteration]);
      expect(r.status, JSON.stringify(alteration)).toBe(400);
      expect(r.body.errors.map((e: { path: string }) => e.path)).toContain(path);
    }
    const doc = await h.request('GET', '/openapi.json');
    expect(JSON.stringify(doc.body.components.schemas.Alteration)).toContain('CancelActivity');
  });
});

describe('CancelActivity in a plan', () => {
  it('runs set-based over a batch, fails the jobs it cannot apply, tags the plan, and a revert restores the records', async () => {
    const a = await suspended();
    const b = await suspended();
    const branches = await suspended('two-branches');
    const idle = await suspended();
    await run([idle], [{ type: 'Cancel' }]);
    const before = await instance(a);

    const planId = await submit({
      id: 'cancel-wait-1',
      alterations: [{ type: 'CancelActivity', activityId: 'wait' }],
      filter: { workflowInstanceIds: [a, b, branches, idle] },
    });
    const view = await completed(planId);
    expect(view.plan.jobCounts).toMatchObject({ total: 4, completed: 2, failed: 2 });
    const logOf = new Map(
      view.jobs.map((j: { workflowInstanceId: string; log: unknown[] }) => [j.workflowInstanceId, j.log]),
    );
    expect(logOf.get(a)).toEqual([ok('CancelActivity')]);
    // "wait" is not an activity of two-branches.
    expect(logOf.get(branches)).toEqual([failed('CancelActivity', 'Activity with ID wait not found')]);
    expect(logOf.get(idle)).toEqual([failed('CancelActivity', `Workflow instance ${idle} is finished`)]);
    for (const id of [a, b]) {
      const i = await instance(id);
      expect(i).toMatchObject({ status: 'Finished', subStatus: 'Finished', bookmarks: [] });
      expect(records(i)).toEqual(['start:Completed', 'wait:Canceled']);
    }
    expect((await instance(branches)).subStatus).toBe('Suspended');

    // The Temporal UI can find the plan by its alteration type.
    const described = await h.client.workflow.getHandle(`alteration-plan-${planId}`).describe();
    expect(described.typedSearchAttributes.get(PLAN_TYPES_ATTRIBUTE)).toEqual(['CancelActivity']);

    // The revert brings the bookmark back with its record Running, so the instance is exactly as it was.
    const revertId = await revert(planId, 'cancel-wait-1-undo');
    const reverted = await completed(revertId);
    expect(reverted.plan.jobCounts).toMatchObject({ total: 2, completed: 2, failed: 0 });
    expect(await instance(a)).toEqual(before);
    expect(records(await instance(b))).toEqual(['start:Completed', 'wait:Running']);

    // b goes on by its event; a revert of the revert cancels a again and leaves b alone.
    expect(await trigger('approve', b)).toEqual([b]);
    const resumed = await until(b, 'Finished');
    expect(records(resumed)).toEqual(['start:Completed', 'wait:Completed', 'done:Completed']);
    const againId = await revert(revertId, 'cancel-wait-1-redo');
    const again = await completed(againId);
    expect(again.plan.jobCounts).toMatchObject({ total: 2, completed: 1, failed: 1 });
    const redone = await instance(a);
    expect(redone).toMatchObject({ status: 'Finished', subStatus: 'Finished', bookmarks: [] });
    expect(records(redone)).toEqual(['start:Completed', 'wait:Canceled']);
    expect(records(await instance(b))).toEqual(['start:Completed', 'wait:Completed', 'done:Completed']);
  });
});

describe('a revert of Cancel', () => {
  it('brings the waiting record back with the bookmark, as for CancelActivity', async () => {
    const id = await suspended();
    const before = await instance(id);
    const planId = await submit({ alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: [id] } });
    await completed(planId);
    expect(records(await instance(id))).toEqual(['start:Completed', 'wait:Canceled']);
    await completed(await revert(planId));
    expect(await instance(id)).toEqual(before);
    expect(await trigger('approve', id)).toEqual([id]);
    expect(records(await until(id, 'Finished'))).toEqual(['start:Completed', 'wait:Completed', 'done:Completed']);
  });
});

describe('CancelActivity in a preview', () => {
  it('shows what the plan would change, instance by instance, and writes nothing', async () => {
    const a = await suspended();
    const branches = await suspended('two-branches');
    const other = await suspended();
    const rows = async () =>
      (
        await h.pool.query(
          `SELECT i.id, i.revision, i.xmin::text AS xmin,
                  (SELECT json_agg(r.status ORDER BY r.id) FROM activity_records r WHERE r.instance_id = i.id) AS records
             FROM workflow_instances i WHERE i.id = ANY($1::text[]) ORDER BY i.id`,
          [[a, branches, other]],
        )
      ).rows;
    const before = await rows();
    const preview = async (activityId: string, ids: string[]) => {
      const r = await h.request('POST', '/alterations/preview', {
        body: { alterations: [{ type: 'CancelActivity', activityId }], filter: { workflowInstanceIds: ids } },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body;
    };

    const waitItems = await preview('wait', [a, other]);
    expect(waitItems.matchedCount).toBe(2);
    const first = waitItems.items.find((x: { workflowInstanceId: string }) => x.workflowInstanceId === a);
    expect(first).toEqual({
      workflowInstanceId: a,
      isSuccessful: true,
      log: [ok('CancelActivity')],
      changes: [
        { path: '/status', before: 'Running', after: 'Finished' },
        { path: '/subStatus', before: 'Suspended', after: 'Finished' },
        { path: '/bookmarks', before: [{ activityId: 'wait', eventName: 'approve' }], after: [] },
        { path: '/finishedAt', before: null, after: expect.any(String) },
      ],
    });

    const left = await preview('waitLeft', [branches]);
    expect(left.items[0]).toMatchObject({
      isSuccessful: true,
      changes: [{ path: '/bookmarks', after: [{ activityId: 'waitRight', eventName: 'right' }] }],
    });
    const notWaiting = await preview('leftDone', [branches]);
    expect(notWaiting.items[0]).toMatchObject({
      isSuccessful: false,
      log: [failed('CancelActivity', 'Activity leftDone is not scheduled or waiting')],
      changes: [],
    });
    expect(await rows()).toEqual(before); // not one row version changed, no record either
  });
});
