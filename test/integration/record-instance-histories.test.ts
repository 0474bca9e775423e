import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { approvalWithNote, chain, event, fault, lit, setVariable, writeLine } from '../support/workflows.js';

/**
 * Records the instance histories that test/integration/plan-replay.test.ts replays: the lifelong instance
 * workflow as the release that runs it writes its history, saved to test/fixtures/ (protobuf, as
 * plan-replay.test.ts reads them). Run on purpose only, before a change to workflows/instance-execution.ts,
 * on the code of the release whose histories must go on replaying:
 *
 *   RECORD_INSTANCE_HISTORIES=1 npx vitest run test/integration/record-instance-histories.test.ts
 *
 * Each history is that of one instance: its start (the relay's `workflow.start` with where it stands), the
 * relay's words after what committed in Postgres (a migration, a trigger, a cancel, a fault), the steps its
 * workflow runs (an outbound call), and its end.
 */
const RECORD = process.env.RECORD_INSTANCE_HISTORIES === '1';
const PREFIX = process.env.RECORD_INSTANCE_HISTORIES_PREFIX ?? 'instance-history-local';

let h: Harness;
let server: Server;
/** Requests to /hold wait here until the test answers them (an endpoint that hangs). */
const held: ServerResponse[] = [];
const run = Math.random().toString(36).slice(2, 8);

beforeAll(async () => {
  if (!RECORD) return;
  h = await createHarness();
  server = createServer((req, res) => {
    req.resume();
    if (req.url === '/hold') held.push(res);
    else res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  for (const res of held.splice(0)) res.end('ok');
  await h?.close();
  server?.close();
});

const instance = async (id: string) => (await h.request('GET', `/workflow-instances/${id}`)).body;

const start = async (definitionId: string, version?: number) =>
  (await h.request('POST', '/workflow-instances', { body: { definitionId, ...(version ? { version } : {}) } })).body
    .workflowInstanceId as string;

/** The workflow as Temporal shows it once its WorkflowInstanceStatus is `status` (and `execution`). */
const reaches = (id: string, status: string, execution = 'RUNNING') =>
  eventually(
    async () => {
      const d = await h.client.workflow
        .getHandle(instanceWorkflowId(id))
        .describe()
        .catch(() => undefined);
      return d?.status.name === execution && d.searchAttributes.WorkflowInstanceStatus?.[0] === status ? d : undefined;
    },
    `the workflow of ${id} to show ${status} (${execution})`,
    30_000,
  );

/** Waits until the workflow has no task outstanding, then writes its history to test/fixtures/. */
async function save(id: string, name: string): Promise<proto.temporal.api.history.v1.IHistory> {
  const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
  const history = await eventually(async () => {
    if ((await handle.describe()).raw.pendingWorkflowTask) return undefined;
    const fetched = await handle.fetchHistory();
    const last = fetched.events?.[fetched.events.length - 1];
    // Settled: no workflow task scheduled or running (the commands of the last one follow its completion).
    return last && !last.workflowTaskScheduledEventAttributes && !last.workflowTaskStartedEventAttributes
      ? fetched
      : undefined;
  }, `the history of ${id} to settle`);
  const bytes = proto.temporal.api.history.v1.History.encode(history).finish();
  await writeFile(new URL(`../fixtures/${PREFIX}-${name}.bin`, import.meta.url), bytes);
  return history;
}

const plan = async (alterations: unknown[], ids: string[]) => {
  const r = await h.request('POST', '/alterations/submit', {
    body: { alterations, filter: { workflowInstanceIds: ids } },
  });
  expect(r.status).toBe(202);
  await eventually(
    async () => ((await h.request('GET', `/alterations/${r.body.planId}`)).body.plan.status === 4 ? true : undefined),
    'the plan to complete',
  );
  return r.body.planId as string;
};

describe.skipIf(!RECORD)('recording instance histories (RECORD_INSTANCE_HISTORIES=1)', () => {
  it('records a suspended instance migrated to version 2, then triggered to its end', async () => {
    const def = `rec-migrate-${run}`;
    expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(def) })).status).toBe(201);
    expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(def, 'v2') })).status).toBe(201);
    const id = await start(def, 1);
    await reaches(id, 'Running/Suspended');
    await plan([{ type: 'Migrate', targetVersion: 2 }], [id]);
    await eventually(
      async () =>
        (await h.client.workflow.getHandle(instanceWorkflowId(id)).describe()).memo?.version === 2 ? true : undefined,
      'the memo to say version 2',
    );
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    await reaches(id, 'Finished/Finished', 'COMPLETED');
    await save(id, 'migrated-finished');
  });

  it('records a suspended instance cancelled by a plan', async () => {
    const def = `rec-cancel-${run}`;
    expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(def) })).status).toBe(201);
    const id = await start(def);
    await reaches(id, 'Running/Suspended');
    await plan([{ type: 'Cancel' }], [id]);
    await reaches(id, 'Finished/Cancelled', 'CANCELLED');
    await save(id, 'cancelled');
  });

  it('records an instance faulted by its step inside Postgres (left open)', async () => {
    const def = `rec-fault-${run}`;
    const body = chain(def, [writeLine('start', 'started'), fault('charge', 'card declined')]);
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const id = await start(def);
    expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Faulted' });
    await reaches(id, 'Running/Faulted');
    await save(id, 'faulted');
  });

  it('records an instance whose workflow makes its call, then waits, then is triggered to its end', async () => {
    const def = `rec-call-${run}`;
    const body = chain(
      def,
      [
        writeLine('start', 'started'),
        callStep(await connection('ping'), '/ping'),
        event('wait', 'after-call'),
        setVariable('set', 'note', 'called', 'String'),
      ],
      { variables: [{ id: 'note', name: 'Note', typeName: 'String' }] },
    );
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const id = await start(def);
    await reaches(id, 'Running/Suspended');
    await h.request('POST', '/events/after-call/trigger', { body: { workflowInstanceId: id } });
    await reaches(id, 'Finished/Finished', 'COMPLETED');
    await save(id, 'call-suspended-finished');
  });

  it('records an instance whose call goes through the calls task queue (a timeout past the inline bound)', async () => {
    // From patch level 3 a call through a connection that answers within WORKER_INLINE_CALL_MAX_MS (10 s) is made
    // inside the workflow task (the recording above); this connection's 60 s keeps the call an activity task.
    const def = `rec-queued-${run}`;
    const body = chain(def, [writeLine('start', 'started'), callStep(await connection('queued', 60_000), '/ping')]);
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const id = await start(def);
    await reaches(id, 'Finished/Finished', 'COMPLETED');
    const { events } = await save(id, 'call-queued-finished');
    expect(events?.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callOutbound')).toBe(
      true,
    );
  });

  it("records a call turned back over its tenant's share, woken when a place frees, then made", async () => {
    // TENANT_OUTBOUND_CALLS (5) calls of the tenant hang; the sixth waits its second inside the worker, is turned
    // back (the worker keeps its workflow in line), and is woken (`callPlaceFreed`) when one of the five ends.
    const def = `rec-wake-${run}`;
    const body = chain(def, [writeLine('start', 'started'), callStep(await connection('hold'), '/hold')]);
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const hanging: string[] = [];
    for (let i = 0; i < 5; i++) hanging.push(await start(def));
    await eventually(async () => (held.length === 5 ? true : undefined), 'five calls to hang', 30_000);
    const id = await start(def);
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    const turnedBack = async () =>
      (await handle.fetchHistory()).events?.some((e) => e.timerStartedEventAttributes) ? true : undefined;
    await eventually(turnedBack, 'the sixth call to be turned back and wait', 30_000);
    held.shift()!.end('ok');
    await eventually(async () => (held.length === 5 ? true : undefined), 'the woken call to be made', 30_000);
    for (const res of held.splice(0)) res.end('ok');
    await reaches(id, 'Finished/Finished', 'COMPLETED');
    const { events } = await save(id, 'call-woken-finished');
    expect(events?.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'callPlaceFreed')).toBe(true);
    expect(events?.some((e) => e.timerCanceledEventAttributes)).toBe(true);
    for (const other of hanging) await reaches(other, 'Finished/Finished', 'COMPLETED');
  });
});

/** A connection to the recorder's endpoint, made once per name (`timeoutMs`: the default, 10 s, when absent). */
async function connection(name: string, timeoutMs?: number): Promise<string> {
  const full = `rec-${name}-${run}`;
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const made = await h.request('POST', '/connection-configuration', {
    body: {
      name: full,
      connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
      connectionConfiguration: { baseUrl, ...(timeoutMs !== undefined ? { timeoutMs } : {}) },
    },
  });
  expect(made.status).toBe(201);
  return full;
}

/** A Send HTTP Request step `call` through connection `name` to `path`. */
const callStep = (name: string, path: string) => ({
  id: 'call',
  type: 'Elsa.Http.SendHttpRequest',
  version: 1,
  connection: {
    typeName: 'ConnectionProperties<Elsa.Connections.Http.HttpConnectionConfiguration>',
    expression: { type: 'Literal', value: { connectionName: name } },
  },
  method: lit('GET'),
  path: lit(path),
});
