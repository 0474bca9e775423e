import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { approvalWithNote, chain, event, setVariable, varRef, writeLine } from '../support/workflows.js';

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

const approval = (definitionId: string, finalText: string) => approvalWithNote(definitionId, finalText, 1);

async function publish(def: unknown) {
  const r = await h.request('POST', '/workflow-definitions', { body: def });
  expect(r.status).toBe(201);
  return r.body as { id: string; version: number };
}

async function startInstance(definitionId: string, variables?: Record<string, unknown>) {
  const r = await h.request('POST', '/workflow-instances', {
    body: { definitionId, ...(variables ? { variables } : {}) },
  });
  expect(r.status).toBe(202);
  return r.body.workflowInstanceId as string;
}

async function instance(id: string) {
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

async function suspended(definitionId = 'approval') {
  const id = await startInstance(definitionId);
  await until(id, 'Suspended');
  return id;
}

const run = (workflowInstanceIds: string[], alterations: unknown[]) =>
  h.request('POST', '/alterations/run', { body: { alterations, workflowInstanceIds } });

beforeAll(async () => {
  h = await createHarness();
  await publish(approval('approval', 'v1 done'));
  // Faults at "set": the Int32 variable cannot take the text held in "input"; fixable by changing "input".
  await publish(
    chain('fragile', [{ ...setVariable('set', 'count', null), value: varRef('input') }, writeLine('end', 'set ok')], {
      variables: [
        { id: 'count', name: 'Count', typeName: 'Int32', value: 0 },
        { id: 'input', name: 'Input', typeName: 'Object', value: 'not a number' },
      ],
    }),
  );
});
afterAll(() => h?.close());

describe('ModifyVariable', () => {
  it('sets the variable, converted to its type, and logs success', async () => {
    const id = await suspended();
    const r = await run([id], [{ type: 'ModifyVariable', variableId: 'amount', value: '42' }]);
    expect(r.status).toBe(200);
    expect(r.body.results).toEqual([
      { workflowInstanceId: id, isSuccessful: true, workflowHasScheduledWork: false, log: [ok('ModifyVariable')] },
    ]);
    const i = await instance(id);
    expect(i.variables.find((v: { id: string }) => v.id === 'amount').value).toBe(42);
    expect(i.subStatus).toBe('Suspended');
  });

  it('fails for an unknown variable and for a value of the wrong type', async () => {
    const id = await suspended();
    const unknown = await run([id], [{ type: 'ModifyVariable', variableId: 'nope', value: 1 }]);
    expect(unknown.body.results[0]).toMatchObject({
      isSuccessful: false,
      log: [failed('ModifyVariable', 'Variable with ID nope not found')],
    });
    const wrongType = await run([id], [{ type: 'ModifyVariable', variableId: 'amount', value: 'forty' }]);
    expect(wrongType.body.results[0].log).toEqual([
      failed('ModifyVariable', 'Value is not a valid Int32 for variable amount'),
    ]);
    expect((await instance(id)).variables.find((v: { id: string }) => v.id === 'amount').value).toBe(1);
  });
});

describe('atomicity', () => {
  it('leaves the instance exactly as it was when a later alteration fails', async () => {
    const id = await suspended();
    const before = await instance(id);
    const r = await run(
      [id],
      [
        { type: 'ModifyVariable', variableId: 'amount', value: 7 },
        { type: 'ScheduleActivity', activityId: 'note' },
        { type: 'ModifyVariable', variableId: 'missing', value: 1 },
        { type: 'Cancel' },
      ],
    );
    expect(r.body.results[0]).toEqual({
      workflowInstanceId: id,
      isSuccessful: false,
      workflowHasScheduledWork: false,
      log: [
        ok('ModifyVariable'),
        ok('ScheduleActivity'),
        failed('ModifyVariable', 'Variable with ID missing not found'),
      ],
    });
    const after = await instance(id);
    expect(after).toEqual(before);
  });
});

describe('Migrate', () => {
  it('reports an unknown target version and a target lacking the suspended activity', async () => {
    const id = await suspended();
    const unknown = await run([id], [{ type: 'Migrate', targetVersion: 99 }]);
    expect(unknown.body.results[0].log).toEqual([
      failed('Migrate', 'Workflow definition with ID approval and version 99 not found'),
    ]);

    await publish(chain('approval-lacking', [writeLine('start', 'x'), event('wait', 'approve')]));
    const lacking = await suspended('approval-lacking');
    const v2 = await publish(chain('approval-lacking', [writeLine('start', 'x'), event('other', 'approve')]));
    const r = await run([lacking], [{ type: 'Migrate', targetVersion: v2.version }]);
    expect(r.body.results[0].log).toEqual([failed('Migrate', `Activity wait does not exist in version ${v2.version}`)]);
    expect((await instance(lacking)).version).toBe(1);
  });

  it('moves a suspended instance to the target version, which it then follows when resumed', async () => {
    await publish(approval('migrating', 'v1 done'));
    const id = await suspended('migrating');
    const v2 = await publish({
      ...approval('migrating', 'v2 done'),
      variables: [
        ...approval('x', '').variables,
        { id: 'extra', name: 'Extra', typeName: 'String', value: 'new default' },
      ],
    });
    const r = await run([id], [{ type: 'Migrate', targetVersion: v2.version }]);
    expect(r.body.results[0]).toMatchObject({ isSuccessful: true, log: [ok('Migrate')] });
    const migrated = await instance(id);
    expect(migrated).toMatchObject({ version: 2, definitionVersionId: v2.id, subStatus: 'Suspended' });
    expect(migrated.variables.find((v: { id: string }) => v.id === 'extra').value).toBe('new default');

    const trigger = await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    expect(trigger.body.resumedWorkflowInstanceIds).toEqual([id]);
    const finished = await until(id, 'Finished');
    expect(finished.journal.map((j: { message: string }) => j.message)).toEqual(['started', 'v2 done']);
  });
});

describe('ScheduleActivity', () => {
  it('schedules a known activity, dispatches the instance and runs it', async () => {
    const id = await suspended();
    const r = await run([id], [{ type: 'ScheduleActivity', activityId: 'note' }]);
    expect(r.body.results[0]).toEqual({
      workflowInstanceId: id,
      isSuccessful: true,
      workflowHasScheduledWork: true,
      log: [ok('ScheduleActivity')],
    });
    const i = await eventually(async () => {
      const x = await instance(id);
      return x.journal.length === 2 && x.subStatus === 'Suspended' ? x : undefined;
    }, 'the scheduled activity to run');
    expect(i.journal.map((j: { message: string }) => j.message)).toEqual(['started', 'note written']);
    expect(i.bookmarks).toEqual([{ activityId: 'wait', eventName: 'approve' }]);
  });

  it('fails for an unknown activity', async () => {
    const id = await suspended();
    const r = await run([id], [{ type: 'ScheduleActivity', activityId: 'ghost' }]);
    expect(r.body.results[0].log).toEqual([failed('ScheduleActivity', 'Activity with ID ghost not found')]);
  });
});

describe('Cancel', () => {
  it('finishes the instance as Cancelled, removing bookmarks and scheduled work', async () => {
    const id = await suspended();
    const r = await run([id], [{ type: 'Cancel' }]);
    expect(r.body.results[0]).toMatchObject({
      isSuccessful: true,
      workflowHasScheduledWork: false,
      log: [ok('Cancel')],
    });
    const i = await instance(id);
    expect(i).toMatchObject({ status: 'Finished', subStatus: 'Cancelled', bookmarks: [], scheduledActivityIds: [] });
    expect(i.finishedAt).not.toBeNull();
    expect(i.activityRecords.find((a: { activityId: string }) => a.activityId === 'wait').status).toBe('Canceled');
    const trigger = await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    expect(trigger.body.resumedWorkflowInstanceIds).toEqual([]);
  });
});

describe('run', () => {
  it('gives one result per distinct id in request order, for finished and unknown instances too', async () => {
    const a = await suspended();
    const b = await suspended();
    const done = await suspended();
    await run([done], [{ type: 'Cancel' }]);
    const r = await run(
      [b, 'no-such-instance', a, b, done],
      [{ type: 'ModifyVariable', variableId: 'note', value: 'hello' }],
    );
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: { workflowInstanceId: string }) => x.workflowInstanceId)).toEqual([
      b,
      'no-such-instance',
      a,
      done,
    ]);
    expect(r.body.results[0].log).toEqual([ok('ModifyVariable')]);
    expect(r.body.results[1]).toEqual({
      workflowInstanceId: 'no-such-instance',
      isSuccessful: false,
      workflowHasScheduledWork: false,
      log: [
        {
          message: 'Workflow instance no-such-instance not found',
          logLevel: 4,
          timestamp: expect.any(String),
          eventName: null,
        },
      ],
    });
    expect(r.body.results[3].log).toEqual([failed('ModifyVariable', `Workflow instance ${done} is finished`)]);
  });

  it("treats another tenant's instance as not found and leaves it unchanged", async () => {
    const id = await suspended();
    const other = await h.keyWith(['alterations:execute'], 'tenant-b');
    const r = await h.request('POST', '/alterations/run', {
      key: other,
      body: { alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }], workflowInstanceIds: [id] },
    });
    expect(r.body.results[0].log[0].message).toBe(`Workflow instance ${id} not found`);
    expect((await instance(id)).variables.find((v: { id: string }) => v.id === 'amount').value).toBe(1);
  });

  it('rejects bad requests naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ alterations: [], workflowInstanceIds: ['x'] }, '/alterations'],
      [{ alterations: [{ type: 'Modify' }], workflowInstanceIds: ['x'] }, '/alterations/0/type'],
      [
        { alterations: [{ type: 'Migrate', targetVersion: 0 }], workflowInstanceIds: ['x'] },
        '/alterations/0/targetVersion',
      ],
      [
        { alterations: [{ type: 'ModifyVariable', variableId: 'a' }], workflowInstanceIds: ['x'] },
        '/alterations/0/value',
      ],
      [{ alterations: [{ type: 'Cancel', extra: 1 }], workflowInstanceIds: ['x'] }, '/alterations/0/extra'],
      [{ alterations: [{ type: 'Cancel' }], workflowInstanceIds: [] }, '/workflowInstanceIds'],
      [{ alterations: [{ type: 'Cancel' }], workflowInstanceIds: ['x'], tenantId: 't' }, '/tenantId'],
    ];
    for (const [body, path] of cases) {
      const r = await h.request('POST', '/alterations/run', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(
        r.body.errors.map((e: { path: string }) => e.path),
        JSON.stringify(body),
      ).toContain(path);
    }
  });
});

describe('retry', () => {
  async function faulted() {
    const id = await startInstance('fragile');
    const i = await until(id, 'Faulted');
    expect(i.incidentCount).toBe(1);
    // Fix the cause so that the retried activity succeeds.
    const fix = await run([id], [{ type: 'ModifyVariable', variableId: 'input', value: 5 }]);
    expect(fix.body.results[0].isSuccessful).toBe(true);
    return id;
  }

  it('retries each faulted instance exactly once, reporting finished, unknown and not faulted ones', async () => {
    const a = await faulted();
    const b = await faulted();
    const finishedOne = await suspended();
    await run([finishedOne], [{ type: 'Cancel' }]);
    const healthy = await suspended();

    const r = await h.request('POST', '/alterations/workflows/retry', {
      body: { workflowInstanceIds: [a, b, a, finishedOne, 'missing', healthy, b] },
    });
    expect(r.status).toBe(200);
    expect(r.body.results).toEqual([
      { workflowInstanceId: a, isSuccessful: true, workflowHasScheduledWork: true, log: [ok('ScheduleActivity')] },
      { workflowInstanceId: b, isSuccessful: true, workflowHasScheduledWork: true, log: [ok('ScheduleActivity')] },
      {
        workflowInstanceId: finishedOne,
        isSuccessful: false,
        workflowHasScheduledWork: false,
        log: [failed('ScheduleActivity', `Workflow instance ${finishedOne} is finished`)],
      },
      {
        workflowInstanceId: 'missing',
        isSuccessful: false,
        workflowHasScheduledWork: false,
        log: [
          {
            message: 'Workflow instance missing not found',
            logLevel: 4,
            timestamp: expect.any(String),
            eventName: null,
          },
        ],
      },
      {
        workflowInstanceId: healthy,
        isSuccessful: false,
        workflowHasScheduledWork: false,
        log: [
          {
            message: `Workflow instance ${healthy} has no incidents to retry`,
            logLevel: 3,
            timestamp: expect.any(String),
            eventName: null,
          },
        ],
      },
    ]);
    for (const id of [a, b]) {
      const done = await until(id, 'Finished');
      expect(done.incidentCount).toBe(0);
      expect(done.variables.find((v: { id: string }) => v.id === 'count').value).toBe(5);
      // The faulted attempt, then exactly one retried execution of "set", then "end".
      expect(
        done.activityRecords.map((x: { activityId: string; status: string }) => `${x.activityId}:${x.status}`),
      ).toEqual(['set:Faulted', 'set:Completed', 'end:Completed']);
      expect(done.journal.map((j: { message: string }) => j.message)).toEqual(['set ok']);
    }
  });

  it('has a GET form taking repeated query parameters', async () => {
    const a = await faulted();
    const b = await faulted();
    const r = await h.request(
      'GET',
      `/alterations/workflows/retry?workflowInstanceIds=${a}&workflowInstanceIds=${b}&activityIds=set`,
    );
    expect(r.status).toBe(200);
    expect(
      r.body.results.map((x: { workflowInstanceId: string; isSuccessful: boolean }) => [
        x.workflowInstanceId,
        x.isSuccessful,
      ]),
    ).toEqual([
      [a, true],
      [b, true],
    ]);
    await until(a, 'Finished');
    await until(b, 'Finished');
    const missing = await h.request('GET', '/alterations/workflows/retry');
    expect(missing.status).toBe(400);
    expect(missing.body.errors[0].path).toBe('/query/workflowInstanceIds');
  });
});

describe('permissions', () => {
  it('needs alterations:execute', async () => {
    const viewer = await h.keyWith(['alterations:view']);
    const r = await h.request('POST', '/alterations/run', {
      key: viewer,
      body: { alterations: [{ type: 'Cancel' }], workflowInstanceIds: ['x'] },
    });
    expect(r.status).toBe(403);
    expect(r.body.detail).toContain('alterations:execute');
    const none = await h.request('POST', '/alterations/workflows/retry', {
      key: null,
      body: { workflowInstanceIds: ['x'] },
    });
    expect(none.status).toBe(401);
    const legacy = await h.keyWith(['run:alterations']);
    expect(
      (
        await h.request('POST', '/alterations/run', {
          key: legacy,
          body: { alterations: [{ type: 'Cancel' }], workflowInstanceIds: ['x'] },
        })
      ).status,
    ).toBe(403);
  });
});
