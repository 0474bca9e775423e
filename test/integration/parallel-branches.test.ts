import { createServer, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { connect, event, finish, lit, writeLine } from '../support/workflows.js';

/**
 * A flowchart whose branches run side by side: what one branch does never ends the instance while another
 * still has work out. An outbound call in flight is live work (src/engine/transitions.ts `settle`), and a
 * Finish ends the instance by cancelling what the other branches still run (src/engine/handlers/finish.ts).
 */
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
const run = Math.random().toString(36).slice(2, 8);

let h: Harness;
let server: Server;
/** Calls the endpoint holds until the test answers them. */
const held: ServerResponse[] = [];

const callActivity = (id: string) => ({
  id,
  type: 'Elsa.Http.SendHttpRequest',
  version: 1,
  connection: {
    typeName: `ConnectionProperties<${HTTP}>`,
    expression: { type: 'Literal', value: { connectionName: `held-${run}` } },
  },
  method: lit('GET'),
  path: lit('/ping'),
  resultVariable: lit('code'),
});

/** A flowchart from `start` (WriteLine 'started') with the variable `code` the calls write their status to. */
const flow = (definitionId: string, activities: object[], connections: object[]) => ({
  definitionId,
  variables: [{ id: 'code', name: 'Code', typeName: 'Int32', value: 0 }],
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [writeLine('start', 'started'), ...activities],
    connections,
  },
});

/** `start` leads to both `wait` (on `eventName`) → `approved` and to `second`. */
const forked = (definitionId: string, eventName: string, second: object[], secondConnections: object[]) =>
  flow(
    definitionId,
    [event('wait', eventName), writeLine('approved', 'approved'), ...second],
    [connect('start', 'wait'), connect('wait', 'approved'), ...secondConnections],
  );

beforeAll(async () => {
  h = await createHarness();
  server = createServer((_req, res) => void held.push(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const connection = await h.request('POST', '/connection-configuration', {
    body: {
      name: `held-${run}`,
      connectionType: HTTP,
      connectionConfiguration: { baseUrl: `http://127.0.0.1:${port}` },
    },
  });
  expect(connection.status, JSON.stringify(connection.body)).toBe(201);
  const definitions = [
    // wait → approved, and call → called.
    forked(
      `calling-${run}`,
      `go-${run}`,
      [callActivity('call'), writeLine('called', 'called')],
      [connect('start', 'call'), connect('call', 'called')],
    ),
    // wait → approved, and wait2 → end (Finish).
    forked(
      `finishing-${run}`,
      `go-${run}`,
      [event('wait2', `end-${run}`), finish('end')],
      [connect('start', 'wait2'), connect('wait2', 'end')],
    ),
    // One branch: call → called.
    flow(
      `chain-call-${run}`,
      [callActivity('call'), writeLine('called', 'called')],
      [connect('start', 'call'), connect('call', 'called')],
    ),
    // wait → approved, and call → end (Finish): the Finish runs in the instance's workflow, after the call.
    forked(
      `call-then-finish-${run}`,
      `never-${run}`,
      [callActivity('call'), finish('end')],
      [connect('start', 'call'), connect('call', 'end')],
    ),
  ];
  for (const body of definitions) {
    const res = await h.request('POST', '/workflow-definitions', { body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
});
afterAll(async () => {
  for (const res of held.splice(0)) res.destroy();
  await h?.close();
  server?.close();
});

const instance = async (id: string) => (await h.request('GET', `/workflow-instances/${id}`)).body;
const records = (i: { activityRecords: { activityId: string; status: string }[] }) =>
  Object.fromEntries(i.activityRecords.map((r) => [r.activityId, r.status]));
const journal = (i: { journal: { message: string }[] }) => i.journal.map((j) => j.message).sort();
const code = (i: { variables: { id: string; value: unknown }[] }) => i.variables.find((v) => v.id === 'code')?.value;

async function start(definitionId: string): Promise<string> {
  const res = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return res.body.workflowInstanceId as string;
}

/** Starts an instance of `calling-…` and waits until its call is held by the endpoint. */
async function startCalling(): Promise<string> {
  const before = held.length;
  const id = await start(`calling-${run}`);
  await eventually(async () => (held.length > before ? true : undefined), 'the call to reach the endpoint');
  const i = await instance(id);
  expect(records(i)).toEqual({ start: 'Completed', wait: 'Running', call: 'Running' });
  return id;
}

/** Answers the held call, then waits for the instance to finish in Postgres and in Temporal. */
async function answerAndFinish(id: string) {
  held.shift()!.writeHead(200).end('ok');
  const done = await eventually(async () => {
    const i = await instance(id);
    return i.subStatus === 'Finished' ? i : undefined;
  }, 'the instance to finish');
  const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
  await eventually(
    async () => ((await handle.describe()).status.name === 'COMPLETED' ? true : undefined),
    'its workflow to complete',
  );
  return done;
}

describe('an instance whose other branch has a call out', () => {
  it('is not finished by a trigger that ends the waiting branch: the call comes back, its branch runs, then it finishes', async () => {
    const id = await startCalling();
    const trigger = await h.request('POST', `/events/go-${run}/trigger`, { body: { workflowInstanceId: id } });
    expect(trigger.body.resumedWorkflowInstanceIds).toEqual([id]);
    expect(trigger.headers.get('wfa-resumption')).toBe('inline');
    const resumed = await instance(id);
    expect(resumed).toMatchObject({ status: 'Running', subStatus: 'Executing', finishedAt: null });
    expect(records(resumed)).toEqual({ start: 'Completed', wait: 'Completed', approved: 'Completed', call: 'Running' });

    const done = await answerAndFinish(id);
    expect(journal(done)).toEqual(['approved', 'called', 'started']);
    expect(code(done)).toBe(200);
    expect(records(done)).toEqual({
      start: 'Completed',
      wait: 'Completed',
      approved: 'Completed',
      call: 'Completed',
      called: 'Completed',
    });
  });

  it('is not finished by a CancelActivity of the wait: it finishes once the call and its branch are done', async () => {
    const id = await startCalling();
    const altered = await h.request('POST', '/alterations/run', {
      body: { alterations: [{ type: 'CancelActivity', activityId: 'wait' }], workflowInstanceIds: [id] },
    });
    expect(altered.body.results[0].isSuccessful, JSON.stringify(altered.body)).toBe(true);
    expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Executing', finishedAt: null });

    const done = await answerAndFinish(id);
    expect(journal(done)).toEqual(['called', 'started']);
    expect(code(done)).toBe(200);
    expect(records(done)).toEqual({ start: 'Completed', wait: 'Canceled', call: 'Completed', called: 'Completed' });
  });

  it('previews a CancelActivity of the wait as the run does: still running', async () => {
    const id = await startCalling();
    const preview = await h.request('POST', '/alterations/preview', {
      body: {
        alterations: [{ type: 'CancelActivity', activityId: 'wait' }],
        filter: { workflowInstanceIds: [id] },
      },
    });
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    const paths = (preview.body.items[0].changes as { path: string }[]).map((c) => c.path);
    expect(paths).toContain('/bookmarks');
    expect(paths).not.toContain('/status');
    expect(paths).not.toContain('/finishedAt');
    // The preview wrote nothing: the instance still waits, and ends when triggered and called back.
    await h.request('POST', `/events/go-${run}/trigger`, { body: { workflowInstanceId: id } });
    await answerAndFinish(id);
  });
});

describe('an instance with its call out, altered', () => {
  async function startChain(version = 1): Promise<string> {
    const before = held.length;
    const res = await h.request('POST', '/workflow-instances', {
      body: { definitionId: `chain-call-${run}`, version },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.workflowInstanceId as string;
    await eventually(async () => (held.length > before ? true : undefined), 'the call to reach the endpoint');
    return id;
  }

  it('finishes when one job schedules the calling activity again and cancels it: nothing is left out', async () => {
    const id = await startChain();
    const altered = await h.request('POST', '/alterations/run', {
      body: {
        alterations: [
          { type: 'ScheduleActivity', activityId: 'call' },
          { type: 'CancelActivity', activityId: 'call' },
        ],
        workflowInstanceIds: [id],
      },
    });
    expect(altered.body.results[0].isSuccessful, JSON.stringify(altered.body)).toBe(true);
    const i = await instance(id);
    expect(i).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
    expect(records(i)).toEqual({ start: 'Completed', call: 'Canceled' });
    // The call that was out comes back: its outcome is not applied.
    held.shift()!.writeHead(200).end('ok');
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    await eventually(
      async () => ((await handle.describe()).status.name === 'COMPLETED' ? true : undefined),
      'its workflow to complete',
    );
    expect(journal(await instance(id))).toEqual(['started']);
  });

  it('is not migrated to a version without the activity whose call is out', async () => {
    const v2 = await h.request('POST', '/workflow-definitions', {
      body: flow(`chain-call-${run}`, [writeLine('called', 'called')], [connect('start', 'called')]),
    });
    expect(v2.status, JSON.stringify(v2.body)).toBe(201);
    const id = await startChain(1);
    const migrated = await h.request('POST', '/alterations/run', {
      body: { alterations: [{ type: 'Migrate', targetVersion: v2.body.version }], workflowInstanceIds: [id] },
    });
    expect(migrated.body.results[0].isSuccessful).toBe(false);
    expect(migrated.body.results[0].log.map((l: { message: string }) => l.message)).toContain(
      `Activity call does not exist in version ${v2.body.version as number}`,
    );
    held.shift()!.writeHead(200).end('ok');
    await eventually(async () => ((await instance(id)).subStatus === 'Finished' ? true : undefined), 'the end');
  });

  it('makes its call again when a revert brings it back from a Cancel, and then finishes', async () => {
    const id = await startChain();
    const submitted = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: [id] } },
    });
    const planOf = async (planId: string) =>
      eventually(
        async () => ((await h.request('GET', `/alterations/${planId}`)).body.plan.status === 4 ? true : undefined),
        'the plan to complete',
      );
    await planOf(submitted.body.planId as string);
    expect(records(await instance(id))).toEqual({ start: 'Completed', call: 'Canceled' });
    const reverted = await h.request('POST', `/alterations/${submitted.body.planId as string}/revert`, { body: {} });
    expect(reverted.status).toBe(202);
    await planOf(reverted.body.planId as string);
    const back = await instance(id);
    expect(back).toMatchObject({ status: 'Running', subStatus: 'Executing' });
    expect(records(back)).toEqual({ start: 'Completed', call: 'Running' });
    // Its workflow makes the call again (the endpoint answers every call from now on), and it finishes.
    const answering = setInterval(() => {
      for (const res of held.splice(0)) res.writeHead(200).end('ok');
    }, 50);
    try {
      // The call waits while the cancelled delivery is out, and looks again after a quarter of the time that one has
      // been out, up to 10 s (`recheckAfterMs`, activities/calls.ts): held since the test began, under the whole
      // suite's load that look can come 10 s after the endpoint answered it, then the call and the last step.
      const done = await eventually(
        async () => {
          const now = await instance(id);
          return now.subStatus === 'Finished' ? now : undefined;
        },
        'the instance to finish',
        45_000,
      );
      expect(journal(done)).toEqual(['called', 'started']);
      expect(code(done)).toBe(200);
      expect(records(done)).toEqual({ start: 'Completed', call: 'Completed', called: 'Completed' });
    } finally {
      clearInterval(answering);
    }
  }, 90_000);
});

describe('a Finish in one branch', () => {
  it('ends the instance and cancels what the other branch still waits on (run inline by the trigger)', async () => {
    const id = await start(`finishing-${run}`);
    await eventually(async () => ((await instance(id)).subStatus === 'Suspended' ? true : undefined), 'the waits');
    const trigger = await h.request('POST', `/events/end-${run}/trigger`, { body: { workflowInstanceId: id } });
    expect(trigger.body.resumedWorkflowInstanceIds).toEqual([id]);
    const i = await instance(id);
    expect(i).toMatchObject({ status: 'Finished', subStatus: 'Finished', bookmarks: [] });
    expect(records(i)).toEqual({ start: 'Completed', wait: 'Canceled', wait2: 'Completed', end: 'Completed' });
    // No finished instance is found waiting.
    const found = await h.request('POST', '/alterations/dry-run', {
      body: { statuses: ['Finished'], activityFilters: [{ activityId: 'wait', status: 'Running' }] },
    });
    expect(found.status).toBe(200);
    expect(found.body.workflowInstanceIds).not.toContain(id);
  });

  it('ends the instance and cancels the other branch when it runs in the workflow, after a call', async () => {
    const before = held.length;
    const id = await start(`call-then-finish-${run}`);
    await eventually(async () => (held.length > before ? true : undefined), 'the call to reach the endpoint');
    const done = await answerAndFinish(id);
    expect(records(done)).toEqual({ start: 'Completed', wait: 'Canceled', call: 'Completed', end: 'Completed' });
    expect(done.bookmarks).toEqual([]);
  });
});
