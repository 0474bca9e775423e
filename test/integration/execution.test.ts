import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { chain, event, fault, finish, orderApproval, setVariable, writeLine } from '../support/workflows.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

async function publish(def: unknown) {
  const res = await h.request('POST', '/workflow-definitions', { body: def });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function start(definitionId: string, extra: Record<string, unknown> = {}, key?: string) {
  const res = await h.request('POST', '/workflow-instances', {
    body: { definitionId, ...extra },
    ...(key ? { key } : {}),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.workflowInstanceId as string;
}

async function read(id: string) {
  const res = await h.request('GET', `/workflow-instances/${id}`);
  expect(res.status).toBe(200);
  return res.body;
}

function until(id: string, predicate: (instance: any) => boolean, what: string, timeoutMs?: number) {
  return eventually(
    async () => {
      const instance = await read(id);
      return predicate(instance) ? instance : undefined;
    },
    `instance ${id} ${what}`,
    timeoutMs,
  );
}

describe('instance execution on Temporal', () => {
  it('runs an instance to Finished, recording each activity, the journal and the variables', async () => {
    await publish(
      chain(
        'straight',
        [writeLine('hello', 'hello'), setVariable('set', 'count', '41', 'Int32'), writeLine('bye', 'bye')],
        {
          variables: [{ id: 'count', name: 'Count', typeName: 'Int32', value: 0 }],
        },
      ),
    );
    const id = await start('straight', { name: 'first', correlationId: 'c-1' });
    const done = await until(id, (i) => i.status === 'Finished', 'finished');
    expect(done.subStatus).toBe('Finished');
    expect(done.finishedAt).not.toBeNull();
    expect(done.journal.map((j: any) => j.message)).toEqual(['hello', 'bye']);
    expect(done.variables).toEqual([{ id: 'count', name: 'Count', typeName: 'Int32', value: 41 }]);
    expect(done.activityRecords.map((r: any) => [r.activityId, r.nodeId, r.status])).toEqual([
      ['hello', 'flow1:hello', 'Completed'],
      ['set', 'flow1:set', 'Completed'],
      ['bye', 'flow1:bye', 'Completed'],
    ]);
    expect(done.activityRecords[1].inputs).toEqual({ variable: 'count', value: '41' });
    expect(done.scheduledActivityIds).toEqual([]);
    expect(done.name).toBe('first');
    expect(done.correlationId).toBe('c-1');
  });

  it('suspends at an event and resumes when the event is triggered', async () => {
    const def = orderApproval('approval');
    def.root.activities.push(writeLine('after', 'approved'));
    def.root.connections.push({
      source: { activity: 'wait', port: 'Done' },
      target: { activity: 'after', port: 'In' },
    });
    await publish(def);
    const a = await start('approval', { correlationId: 'order-a' });
    const b = await start('approval', { correlationId: 'order-b' });
    for (const id of [a, b]) {
      const suspended = await until(id, (i) => i.subStatus === 'Suspended', 'suspended');
      expect(suspended.status).toBe('Running');
      expect(suspended.bookmarks).toEqual([{ activityId: 'wait', eventName: 'approve' }]);
      expect(suspended.activityRecords.at(-1)).toMatchObject({
        activityId: 'wait',
        status: 'Running',
        completedAt: null,
      });
    }

    // Narrowed by correlation id, only order-a resumes.
    const first = await h.request('POST', '/events/approve/trigger', { body: { correlationId: 'order-a' } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ resumedWorkflowInstanceIds: [a] });
    const finishedA = await until(a, (i) => i.status === 'Finished', 'finished');
    expect(finishedA.journal.map((j: any) => j.message)).toEqual(['started', 'approved']);
    expect(finishedA.activityRecords.find((r: any) => r.activityId === 'wait').status).toBe('Completed');
    expect((await read(b)).subStatus).toBe('Suspended');

    const second = await h.request('POST', '/events/approve/trigger', { body: {} });
    expect(second.body).toEqual({ resumedWorkflowInstanceIds: [b] });
    await until(b, (i) => i.status === 'Finished', 'finished');
    // Nothing is left waiting: a third trigger resumes nothing.
    expect((await h.request('POST', '/events/approve/trigger', { body: {} })).body).toEqual({
      resumedWorkflowInstanceIds: [],
    });
  });

  it('records an incident on a fault and leaves the instance Running/Faulted', async () => {
    await publish(chain('faulty', [writeLine('before', 'before'), fault('boom', 'The order service is down')]));
    const id = await start('faulty');
    const faulted = await until(id, (i) => i.subStatus === 'Faulted', 'faulted');
    expect(faulted.status).toBe('Running');
    expect(faulted.incidentCount).toBe(1);
    expect(faulted.incidents).toEqual([
      {
        activityId: 'boom',
        activityType: 'Elsa.Fault',
        message: 'The order service is down',
        timestamp: expect.any(String),
      },
    ]);
    expect(faulted.activityRecords.map((r: any) => [r.activityId, r.status])).toEqual([
      ['before', 'Completed'],
      ['boom', 'Faulted'],
    ]);
    expect(faulted.journal.map((j: any) => j.message)).toEqual(['before']);
  });

  it('a Finish activity ends the instance and discards other scheduled work', async () => {
    const def = chain('finisher', [writeLine('a', 'a'), finish('end')]);
    def.root.activities.push(event('wait', 'never'));
    def.root.connections.push({ source: { activity: 'a', port: 'Done' }, target: { activity: 'wait', port: 'In' } });
    await publish(def);
    const id = await start('finisher');
    const done = await until(id, (i) => i.status === 'Finished', 'finished');
    expect(done.subStatus).toBe('Finished');
    expect(done.bookmarks).toEqual([]);
  });

  it('converts initial variables and rejects unknown ones or bad values, naming them', async () => {
    await publish(chain('typed', [writeLine('a', 'a')], { variables: [{ id: 'n', typeName: 'Int32' }] }));
    const bad = await h.request('POST', '/workflow-instances', {
      body: { definitionId: 'typed', variables: { n: 'x', ghost: 1 } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([
      { path: '/variables/n', message: 'Value is not a valid Int32 for variable n' },
      { path: '/variables/ghost', message: 'Variable with ID ghost not found in typed version 1' },
    ]);
    const missing = await h.request('POST', '/workflow-instances', { body: { definitionId: 'nope' } });
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toEqual([{ path: '/definitionId', message: 'Workflow definition nope not found' }]);
    const { rows } = await h.pool.query(
      'SELECT count(*)::int AS n FROM workflow_instances WHERE definition_id IN ($1, $2)',
      ['typed', 'nope'],
    );
    expect(rows[0].n).toBe(0);
  });

  it("another tenant's instance is a 404, and its events do not resume ours", async () => {
    await publish(orderApproval('tenanted'));
    const id = await start('tenanted');
    await until(id, (i) => i.subStatus === 'Suspended', 'suspended');
    const other = await h.keyWith(['*'], 'tenant-b');
    const res = await h.request('GET', `/workflow-instances/${id}`, { key: other });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    const trigger = await h.request('POST', '/events/approve/trigger', { body: {}, key: other });
    expect(trigger.body).toEqual({ resumedWorkflowInstanceIds: [] });
    // The other tenant cannot start our definition either: it does not exist there.
    const foreignStart = await h.request('POST', '/workflow-instances', {
      body: { definitionId: 'tenanted' },
      key: other,
    });
    expect(foreignStart.status).toBe(400);
    expect((await read(id)).subStatus).toBe('Suspended');
  });
});

describe('events at scale', () => {
  it('resumes a hundred suspended instances in one trigger, in creation order, each running on once', async () => {
    const def = await publish(chain('bulk-approval', [event('wait', 'bulk-approve'), writeLine('done', 'approved')]));
    const ids = await seedInstances(h.pool, {
      definitionVersionId: def.id,
      count: 100,
      bookmarks: [{ activityId: 'wait', eventName: 'bulk-approve' }],
      namePrefix: 'bulk-',
    });
    const res = await h.request('POST', '/events/bulk-approve/trigger', { body: {} });
    expect(res.status).toBe(200);
    expect(res.body.resumedWorkflowInstanceIds).toEqual(ids);
    await eventually(
      async () => {
        const { rows } = await h.pool.query(
          "SELECT count(*)::int AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND status = 'Finished'",
          [ids],
        );
        return rows[0].n === 100 ? true : undefined;
      },
      'all hundred to finish',
      60_000,
    );
    const { rows } = await h.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM journal_entries WHERE instance_id = ANY($1::text[]) AND message = 'approved'",
      [ids],
    );
    expect(rows[0]!.n).toBe(100);
    const again = await h.request('POST', '/events/bulk-approve/trigger', { body: {} });
    expect(again.body.resumedWorkflowInstanceIds).toEqual([]);
  }, 90_000);
});

describe('durability', () => {
  it('a worker stopped mid-execution and started again finishes the instance with every step recorded once', async () => {
    const steps = Array.from({ length: 60 }, (_, i) => setVariable(`s${i}`, 'counter', i + 1, 'Int32'));
    const lines = steps.flatMap((s, i) => [s, writeLine(`w${i}`, `line ${i + 1}`)]);
    await publish(chain('long', lines, { variables: [{ id: 'counter', typeName: 'Int32', value: 0 }] }));
    // The start runs the first MAX_INLINE_STEPS (100) steps in its own request and leaves the rest to the
    // instance's workflow, which runs them in one activity within milliseconds: stopping the worker after the start
    // raced that activity (the instance was Finished when a loaded CI machine stopped it). The worker is stopped
    // first, so the instance is left mid-execution for certain, and the rest runs once it is back.
    await h.stopWorker();
    const id = await start('long');
    const midway = await read(id);
    expect(midway.status, 'the instance must still be running when the worker stops').toBe('Running');
    expect(midway.journal.length).toBeGreaterThan(0);
    expect(midway.journal.length).toBeLessThan(60);

    await h.startWorker();
    const done = await until(id, (i) => i.status === 'Finished', 'finished after restart', 60_000);
    expect(done.journal.map((j: any) => j.message)).toEqual(Array.from({ length: 60 }, (_, i) => `line ${i + 1}`));
    expect(done.variables.find((v: any) => v.id === 'counter').value).toBe(60);
    const ids = done.activityRecords.map((r: any) => r.activityId);
    expect(ids).toHaveLength(120);
    expect(new Set(ids).size).toBe(120);
    expect(done.activityRecords.every((r: any) => r.status === 'Completed')).toBe(true);
  }, 120_000);
});
