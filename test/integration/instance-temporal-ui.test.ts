import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WorkflowNotFoundError } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { loadConfig } from '../../src/config.js';
import { cachedCliPath } from '../../src/temporal/cli-binary.js';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { OutboxRelay, type ClaimedRow } from '../../src/temporal/outbox-relay.js';
import { readTidings } from '../../src/temporal/instance-tidings.js';
import { createLogger } from '../../src/logger.js';
import { createConfigCipher } from '../../src/connections/cipher.js';
import { finishOutboundCall, orFault, runStep } from '../../src/engine/executor.js';
import type { Queryable } from '../../src/db/pool.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { localActivities, payloadJson } from '../support/plans.js';
import {
  approvalWithNote,
  chain,
  connect,
  event,
  fault,
  finish,
  flowchart,
  lit,
  setVariable,
  writeLine,
} from '../support/workflows.js';

// Each instance is one Temporal workflow for its whole life (workflows/instance-execution.ts), told every
// change through the outbox (src/temporal/outbox-relay.ts): what the Temporal UI lists, filters and counts
// is what the API says. Checked with the Temporal CLI, as a user would.

let h: Harness;
let server: Server;
/** The requests `server` received. */
const received: { method?: string; url?: string; key?: string | string[] }[] = [];
const run = Math.random().toString(36).slice(2, 8);
const definitionId = `ui-instance-${run}`;
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';

/**
 * Instances whose step that ends them loses its first answer after it committed, as a failed workflow task loses
 * the results of the local activities it ran (they run again in the next task).
 */
const loseEndingAnswer = new Set<string>();
const losingAnswers: ActivityInterceptorsFactory = () => ({
  inbound: {
    async execute(input, next) {
      const result = (await next(input)) as { instance?: { status?: string } } | undefined;
      const arg = input.args[0] as string | { details?: { instanceId?: string } } | undefined;
      const instanceId = typeof arg === 'string' ? arg : arg?.details?.instanceId;
      if (result?.instance?.status === 'Finished' && instanceId && loseEndingAnswer.delete(instanceId))
        throw new Error('the answer was lost');
      return result;
    },
  },
});

beforeAll(async () => {
  h = await createHarness({ workerOptions: { interceptors: { activity: [losingAnswers] } } });
  server = createServer((req, res) => {
    received.push({ method: req.method, url: req.url, key: req.headers['idempotency-key'] });
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(definitionId) })).status).toBe(201);
});
afterAll(async () => {
  await h?.close();
  server?.close();
});

const config = loadConfig({});
const cli = config.temporal.cliPath ?? cachedCliPath(config.cacheDir);

/** `temporal workflow count --query …` of this file's task queue. */
async function temporalCount(query: string): Promise<number> {
  const { stdout } = await promisify(execFile)(cli, [
    'workflow',
    'count',
    '--address',
    inject('temporalAddress'),
    '--namespace',
    'default',
    '--query',
    `TaskQueue = "${h.taskQueue}" AND WorkflowType = "instanceExecution" AND ${query}`,
    '--output',
    'json',
  ]);
  return Number((JSON.parse(stdout) as { count?: string | number }).count ?? 0);
}

const listed = async (query: string) => {
  const ids: string[] = [];
  for await (const w of h.client.workflow.list({ query })) ids.push(w.workflowId);
  return ids;
};

const MIGRATION_013 = fileURLToPath(new URL('../../src/db/migrations/013_outbox_unmade_calls.sql', import.meta.url));

const instance = async (id: string) => (await h.request('GET', `/workflow-instances/${id}`)).body;

/** The worker's step dependencies, for a test that runs a step as the instance's workflow would. */
const stepDeps = () => ({
  pool: h.workerPool,
  definitions: h.definitions,
  logger: createLogger('silent'),
  cipher: createConfigCipher(undefined),
  tidings: readTidings,
});

/** Publishes `start` → `call` (through the connection `name`) → `end` as the definition `name`, and starts an instance. */
async function startCallInstance(name: string): Promise<string> {
  const body = chain(name, [writeLine('start', 'started'), httpCall(name), writeLine('end', 'called')]);
  expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
  return (await h.request('POST', '/workflow-instances', { body: { definitionId: name } })).body
    .workflowInstanceId as string;
}

/** A Send HTTP Request activity `call` through the HTTP connection `connectionName`. */
const httpCall = (connectionName: string, method = 'GET', path = '/ping') => ({
  id: 'call',
  type: 'Elsa.Http.SendHttpRequest',
  version: 1,
  connection: {
    typeName: `ConnectionProperties<${HTTP}>`,
    expression: { type: 'Literal', value: { connectionName } },
  },
  method: lit(method),
  path: lit(path),
});

/** Creates the HTTP connection `name` to the local server `to` (its port). */
async function httpConnection(name: string, to: Server, timeoutMs?: number): Promise<void> {
  const made = await h.request('POST', '/connection-configuration', {
    body: {
      name,
      connectionType: HTTP,
      connectionConfiguration: {
        baseUrl: `http://127.0.0.1:${(to.address() as AddressInfo).port}`,
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      },
    },
  });
  expect(made.status).toBe(201);
}

describe('an instance in Temporal', () => {
  it('is one Running workflow while it waits, completed when it finishes, with its status as attribute', async () => {
    const id = (await h.request('POST', '/workflow-instances', { body: { definitionId } })).body
      .workflowInstanceId as string;
    // Its pure steps ran with the start: it is suspended when the start answers.
    expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Suspended' });
    const workflowId = instanceWorkflowId(id);
    const handle = h.client.workflow.getHandle(workflowId);
    const description = await eventually(async () => {
      const d = await handle.describe().catch(() => undefined);
      return d?.searchAttributes.WorkflowInstanceStatus?.[0] === 'Running/Suspended' ? d : undefined;
    }, 'the workflow, told');
    expect(description.status.name).toBe('RUNNING');
    expect(description.memo).toEqual({ instanceId: id, definitionId, version: 1, tenant: 'default' });
    expect(await description.staticSummary()).toBe(
      `Workflow instance ${id} of ${definitionId}: its whole life, from its start to its end`,
    );
    const metadata = await eventually(async () => {
      const m = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      return m.currentDetails ? m : undefined;
    }, 'its details');
    expect(metadata.currentDetails).toBe(
      `**Running/Suspended** · suspended, waiting on approve (wait) · ${definitionId} v1 · ran start, wait (Running)`,
    );
    await eventually(async () => {
      const ids = await listed(
        `WorkflowInstanceStatus = "Running/Suspended" AND WorkflowDefinitionId = "${definitionId}" AND AlterationTenant = "default" AND ExecutionStatus = "Running"`,
      );
      return ids.includes(workflowId) ? true : undefined;
    }, 'the suspended instance by its attributes');

    // The trigger answers once the resumption committed; the same workflow hears of it and completes.
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    expect(await instance(id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
    expect(await handle.result()).toEqual({
      instance: 'Finished/Finished',
      summary: `finished · ${definitionId} v1 · ran start, wait, done`,
      executedActivityIds: ['start', 'wait', 'done'],
      definitionId,
      version: 1,
      activityCount: 3,
      waitingOn: [],
      incidentCount: 0,
    });
    expect((await handle.describe()).runId).toBe(description.runId);
    expect(await listed(`WorkflowId = "${workflowId}"`)).toEqual([workflowId]);
    // Started with where the instance stood as its input, not signalled: the trigger's word is its one signal.
    const { events } = await handle.fetchHistory();
    const started = events![0]!.workflowExecutionStartedEventAttributes!;
    const input = JSON.parse(Buffer.from(started.input!.payloads![0]!.data!).toString('utf8'));
    expect(input).toMatchObject({ instanceId: id, told: { status: 'Running', subStatus: 'Suspended' } });
    expect(events!.filter((e) => e.workflowExecutionSignaledEventAttributes).length).toBe(1);
  });

  it('is told by signal when a relay started its workflow but died before it could say so', async () => {
    const id = (await h.request('POST', '/workflow-instances', { body: { definitionId } })).body
      .workflowInstanceId as string;
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    const { runId } = await eventually(async () => {
      const d = await handle.describe().catch(() => undefined);
      return d?.searchAttributes.WorkflowInstanceStatus?.[0] === 'Running/Suspended' ? d : undefined;
    }, 'the workflow, started');
    // The outbox row as a relay that died after the start left it: still marked as an instance without one.
    await h.pool.query(
      `INSERT INTO instance_outbox (instance_id, tenant_id, created) VALUES ($1, '', true)
       ON CONFLICT (instance_id) DO UPDATE SET created = true`,
      [id],
    );
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    expect(await handle.result()).toMatchObject({ instance: 'Finished/Finished' });
    expect((await handle.describe()).runId).toBe(runId);
    const { rows } = await h.pool.query('SELECT 1 FROM instance_outbox WHERE instance_id = $1', [id]);
    expect(rows).toEqual([]);
  });

  it('gets no second run from a word claimed before it finished and told after its workflow closed', async () => {
    // A relay of its own on this file's task queue, to tell a word at a chosen moment.
    const relay = new OutboxRelay({
      pool: h.workerPool,
      client: h.client,
      taskQueue: h.taskQueue,
      logger: createLogger('silent'),
      searchAttributes: true,
    });
    const startSuspended = async () => {
      const id = (await h.request('POST', '/workflow-instances', { body: { definitionId } })).body
        .workflowInstanceId as string;
      await eventually(async () => {
        const d = await h.client.workflow
          .getHandle(instanceWorkflowId(id))
          .describe()
          .catch(() => undefined);
        return d?.searchAttributes.WorkflowInstanceStatus?.[0] === 'Running/Suspended' ? d : undefined;
      }, 'the workflow, told');
      // The row as a relay claims it: the instance as it stands now, Running/Suspended.
      const { rows } = await h.pool.query<ClaimedRow>(
        `SELECT id AS instance_id, '0' AS seq, false AS created, tenant_id, definition_id, version, status,
                sub_status, revision::text, bookmarks, false AS has_work
           FROM workflow_instances WHERE id = $1`,
        [id],
      );
      return { id, handle: h.client.workflow.getHandle(instanceWorkflowId(id)), claimed: rows[0]! };
    };

    // Claimed while it waited; meanwhile it was resumed, finished, and its workflow completed.
    const ended = await startSuspended();
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: ended.id } });
    expect(await ended.handle.result()).toMatchObject({ instance: 'Finished/Finished' });
    await relay.tell(ended.claimed);
    // The relay read the instance again: finished, so no new run showing it Running/Suspended.
    expect(await listed(`WorkflowId = "${instanceWorkflowId(ended.id)}"`)).toEqual([instanceWorkflowId(ended.id)]);
    expect((await ended.handle.describe()).status.name).toBe('COMPLETED');

    // A workflow ended by hand while its instance still runs gets a new run, showing where the instance stands.
    const cut = await startSuspended();
    const { runId } = await cut.handle.describe();
    await cut.handle.terminate('ended by hand');
    await relay.tell(cut.claimed);
    const again = await cut.handle.describe();
    expect(again.runId).not.toBe(runId);
    expect(again.status.name).toBe('RUNNING');
    expect(again.searchAttributes.WorkflowInstanceStatus).toEqual(['Running/Suspended']);
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: cut.id } });
    expect(await h.client.workflow.getHandle(instanceWorkflowId(cut.id), again.runId).result()).toMatchObject({
      instance: 'Finished/Finished',
    });
  });

  it('tells a change that committed while the relay was deleting the row it told: the row is released, not left claimed', async () => {
    // A relay of its own, the service's worker (and its relay) stopped: this relay's passes are the only ones.
    await h.stopWorker();
    let started = false;
    const locker = await h.pool.connect();
    try {
      const id = (await h.request('POST', '/workflow-instances', { body: { definitionId } })).body
        .workflowInstanceId as string;
      let committing: Promise<unknown> | undefined;
      // Right after it told the instance's workflow where it stood (Running/Suspended), the instance is cancelled
      // in a transaction that holds its outbox row while the pass ends: the pass's delete waits for it.
      class Racing extends OutboxRelay {
        override async tell(row: ClaimedRow): Promise<void> {
          await super.tell(row);
          if (row.instance_id !== id || committing) return;
          await locker.query('BEGIN');
          await locker.query(
            `UPDATE workflow_instances SET status = 'Finished', sub_status = 'Cancelled', finished_at = now(),
                    scheduled = '[]', bookmarks = '[]', revision = revision + 1 WHERE id = $1`,
            [id],
          );
          committing = new Promise((r) => setTimeout(r, 500)).then(() => locker.query('COMMIT'));
        }
      }
      const relay = new Racing({
        pool: h.workerPool,
        client: h.client,
        taskQueue: h.taskQueue,
        logger: createLogger('silent'),
        searchAttributes: true,
      });
      expect(await relay.pass()).toBeGreaterThanOrEqual(1);
      await committing;
      // The change is the row's next word: released for the next pass, not held until its claim runs out (60 s).
      const { rows } = await h.pool.query('SELECT claimed_until, created FROM instance_outbox WHERE instance_id = $1', [
        id,
      ]);
      expect(rows).toEqual([{ claimed_until: null, created: false }]);
      expect(await relay.pass()).toBeGreaterThanOrEqual(1);
      expect((await h.pool.query('SELECT 1 FROM instance_outbox WHERE instance_id = $1', [id])).rows).toEqual([]);
      // The worker back: the workflow, told Finished/Cancelled and then cancelled, ends Canceled.
      await h.startWorker();
      started = true;
      const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
      await eventually(
        async () => ((await handle.describe()).status.name === 'CANCELLED' ? true : undefined),
        'the workflow to be cancelled',
      );
      expect((await handle.describe()).searchAttributes.WorkflowInstanceStatus).toEqual(['Finished/Cancelled']);
    } finally {
      locker.release();
      if (!started) await h.startWorker();
    }
  });

  it('runs its steps and its outbound call inside its one workflow task, the call answering within the inline bound', async () => {
    const name = `inline-${run}`;
    await httpConnection(name, server);
    // A claim that lapsed long ago, left by a worker that died: given back with the next call's.
    await h.pool.query(
      `INSERT INTO outbound_calls_out (record_id, claim, out_until) VALUES ($1, 'lost', now() - interval '2 hours')`,
      [`lost-${run}`],
    );
    const id = await startCallInstance(name);
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    await eventually(() => handle.describe().then(() => true), 'its workflow');
    const result = (await handle.result()) as { instance: string; executedActivityIds: string[] };
    expect(result.instance).toBe('Finished/Finished');
    expect(result.executedActivityIds).toEqual(['start', 'call', 'end']);
    expect(await instance(id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
    const { events } = await handle.fetchHistory();
    // The connection's timeout is the default, 10 s, within WORKER_INLINE_CALL_MAX_MS: the step that started the call
    // made it (its tenant had a place free) and recorded its outcome, running the step `end` after it in the same
    // transaction: one local activity, in the task its start handed the worker, which completed the workflow. No
    // activity task, no second workflow task, no signal, no patch marker (patch level 3).
    expect(localActivities(events!)).toEqual(['executeInstanceStep']);
    expect(events!.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
    expect(events!.filter((e) => e.workflowTaskCompletedEventAttributes)).toHaveLength(1);
    expect(events!.filter((e) => e.workflowExecutionSignaledEventAttributes)).toEqual([]);
    expect(events!.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? [])).not.toContain('core_patch');
    // The call as its step had it (not read back): one request, with the key of its record; its claim given back
    // with the outcome's recording, and the long-lapsed one with it.
    const { rows: records } = await h.pool.query<{ id: string }>(
      `SELECT id::text FROM activity_records WHERE instance_id = $1 AND activity_id = 'call'`,
      [id],
    );
    expect(received.filter((r) => r.key === `${id}:${records[0]!.id}`)).toEqual([
      { method: 'GET', url: '/ping', key: `${id}:${records[0]!.id}` },
    ]);
    const { rows: claims } = await h.pool.query(`SELECT record_id FROM outbound_calls_out WHERE record_id = ANY($1)`, [
      [records[0]!.id, `lost-${run}`],
    ]);
    expect(claims).toEqual([]);
  });

  it('runs its steps inside its workflow tasks: one activity task, for an outbound call past the inline bound', async () => {
    const name = `steps-${run}`;
    // 60 s: past WORKER_INLINE_CALL_MAX_MS (10 s), so the call goes through the calls task queue.
    await httpConnection(name, server, 60_000);
    const id = await startCallInstance(name);
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    await eventually(() => handle.describe().then(() => true), 'its workflow');
    // `start` ran inside Postgres with the POST; `call` and `end` in this workflow, which ended without a word after.
    // The Result names every step, wherever it ran (the case where the answer of the step that ended it was
    // lost, below).
    const result = (await handle.result()) as { instance: string; executedActivityIds: string[] };
    expect(result.instance).toBe('Finished/Finished');
    expect(result.executedActivityIds).toEqual(['start', 'call', 'end']);
    expect(await instance(id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
    const { events } = await handle.fetchHistory();
    const activities = events!.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
    expect(activities).toEqual(['callOutbound']);
    // The call's activity is given the connection its first part resolved (by name, no secret), so that it reads it
    // with the record in one statement (`prepareCall`).
    const callInput = events!.flatMap((e) =>
      e.activityTaskScheduledEventAttributes
        ? [payloadJson(e.activityTaskScheduledEventAttributes.input?.payloads?.[0]) as { connectionName?: string }]
        : [],
    );
    expect(callInput.map((i) => i.connectionName)).toEqual([name]);
    const markers = events!.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? []);
    // Its steps are local activities: the call's first part and its last, and no step that only read the retry
    // policy first (patch level 1 runs the first step `plainOnly`).
    const local = events!.flatMap((e) =>
      e.markerRecordedEventAttributes?.markerName === 'core_local_activity'
        ? [
            (payloadJson(e.markerRecordedEventAttributes.details?.data?.payloads?.[0]) as { activity_type?: string })
              ?.activity_type,
          ]
        : [],
    );
    expect(local).toContain('executeInstanceStep');
    expect(local).toContain('finishOutboundCall');
    expect(local).not.toContain('peekStep');
    // Started at the current patch level: no patch marker, and no TemporalChangeVersion upsert with it.
    expect(markers).not.toContain('core_patch');
    const upserted = events!.flatMap((e) =>
      Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}),
    );
    expect(upserted).not.toContain('TemporalChangeVersion');
    // Its own steps queued no word to it: neither the one that finished it (migration 020) nor those after which
    // it went on at once, the call's first part and its last (migration 021). Its first word came with its start;
    // no signal followed, no workflow task was lost to a word that came in while it completed, and nothing is
    // left in the outbox.
    expect(events!.filter((e) => e.workflowExecutionSignaledEventAttributes)).toEqual([]);
    expect(events!.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
    await eventually(async () => {
      const { rows } = await h.pool.query('SELECT 1 FROM instance_outbox WHERE instance_id = $1', [id]);
      return rows.length === 0 ? true : undefined;
    }, 'its outbox row told');
  });

  it('names every step in its Result when the answer of the step that ended it was lost', async () => {
    const name = `lost-${run}`;
    await httpConnection(name, server);
    const id = await startCallInstance(name);
    // `end` commits the instance Finished, then its answer is lost and the step runs again (as a failed workflow
    // task's local activities do: before migration 021 a word for the call's last part came in while the task
    // that completed the workflow ran, failing it as UnhandledCommand, and the Result named `start, call`). The
    // step that finds the instance ended tells the workflow what Postgres holds: no word follows an own step's end.
    loseEndingAnswer.add(id);
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    const result = (await eventually(() => handle.result().catch(() => undefined), 'its workflow to complete')) as {
      instance: string;
      executedActivityIds: string[];
      activityCount: number;
      summary: string;
    };
    expect(loseEndingAnswer.has(id)).toBe(false);
    expect(result).toMatchObject({
      instance: 'Finished/Finished',
      executedActivityIds: ['start', 'call', 'end'],
      activityCount: 3,
    });
    expect(result.summary).toContain('ran start, call, end');
    expect(await instance(id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
    // Any step of its own that finds the instance ended tells it so; a step of another caller does not.
    const deps = stepDeps();
    expect(await runStep(deps, id, { ownWorkflow: true })).toMatchObject({
      hasMoreWork: false,
      told: {
        status: 'Finished',
        subStatus: 'Finished',
        story: { activities: 3, lastActivities: [{ id: 'start' }, { id: 'call' }, { id: 'end' }] },
      },
    });
    expect(await runStep(deps, id, {})).not.toHaveProperty('told');
    // So does the call's last part, run again on the ended instance.
    const { rows } = await h.pool.query<{ id: string }>(
      `SELECT id FROM activity_records WHERE instance_id = $1 AND activity_id = 'call'`,
      [id],
    );
    const details = {
      instanceId: id,
      recordId: rows[0]!.id,
      activityId: 'call',
      activityType: 'Elsa.Http.SendHttpRequest',
      connectionName: name,
    };
    expect(await finishOutboundCall(deps, details, { ok: true, status: 200 }, { ownWorkflow: true })).toMatchObject({
      hasMoreWork: false,
      told: { status: 'Finished', story: { activities: 3 } },
    });
    // A read of the word that fails for good leaves it out; the standing still goes with the answer.
    const failing = { ...deps, tidings: () => Promise.reject(new Error('the read failed')) };
    const without = await runStep(failing, id, { ownWorkflow: true });
    expect(without).toMatchObject({ hasMoreWork: false, instance: { status: 'Finished', subStatus: 'Finished' } });
    expect(without).not.toHaveProperty('told');
    // One whose statement fails inside the step's transaction rolls back only itself: the step still commits.
    const failingSql = { ...deps, tidings: (db: Queryable) => db.query('SELECT 1 / 0').then(() => undefined) };
    const failedRead = await runStep(failingSql, id, { ownWorkflow: true });
    expect(failedRead).toMatchObject({ hasMoreWork: false, instance: { status: 'Finished', subStatus: 'Finished' } });
    expect(failedRead).not.toHaveProperty('told');
    expect(
      await finishOutboundCall(failingSql, details, { ok: true, status: 200 }, { ownWorkflow: true }),
    ).toMatchObject({ hasMoreWork: false, instance: { status: 'Finished' } });
    // A step that fails for good on the ended instance answers with where it stands too.
    expect(await orFault(deps, id, () => Promise.reject(new Error('a step that cannot succeed')))).toMatchObject({
      hasMoreWork: false,
      instance: { status: 'Finished', subStatus: 'Finished' },
    });
  });

  it('goes on by itself after a step of its own that leaves a call out: the answer says there is more work', async () => {
    const name = `still-out-${run}`;
    await httpConnection(name, server);
    const body = flowchart(
      name,
      [writeLine('start', 'started'), { ...httpCall(name), id: 'a' }, { ...httpCall(name), id: 'b' }],
      [connect('start', 'a'), connect('start', 'b')],
    );
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const deps = stepDeps();
    await h.stopWorker();
    try {
      const id = (await h.request('POST', '/workflow-instances', { body: { definitionId: name } })).body
        .workflowInstanceId as string;
      const a = (await runStep(deps, id, { callsApart: true, ownWorkflow: true })).call!;
      expect(a.activityId).toBe('a');
      // `b` out too, as a revert that reopens a started call leaves it (nothing of its own left scheduled).
      await h.pool.query(
        `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, inputs, started_at)
         SELECT id, tenant_id, 'b', 'b', 'Elsa.Http.SendHttpRequest', 'b', 'Running', '{}', now() FROM workflow_instances WHERE id = $1`,
        [id],
      );
      await h.pool.query(`UPDATE workflow_instances SET scheduled = '[]' WHERE id = $1`, [id]);
      const details = {
        instanceId: id,
        recordId: a.recordId,
        activityId: 'a',
        activityType: 'Elsa.Http.SendHttpRequest',
        connectionName: name,
      };
      // The outbox queues no word after it (migration 021: a call is out), so the answer must send the workflow on.
      const finished = await finishOutboundCall(deps, details, { ok: true, status: 200 }, { ownWorkflow: true });
      expect(finished).toMatchObject({ hasMoreWork: true, instance: { status: 'Running', subStatus: 'Executing' } });
      const next = await runStep(deps, id, { callsApart: true, ownWorkflow: true });
      expect(next.call?.activityId).toBe('b');
    } finally {
      await h.startWorker();
    }
  });

  it("runs the pure steps after a call in the call's last part; one that cannot run there is left to the next step", async () => {
    const name = `after-call-${run}`;
    await httpConnection(name, server);
    const body = chain(name, [
      writeLine('start', 'started'),
      httpCall(name),
      writeLine('after1', 'one'),
      writeLine('after2', 'two'),
    ]);
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const deps = stepDeps();
    await h.stopWorker();
    try {
      const started = async () => {
        const id = (await h.request('POST', '/workflow-instances', { body: { definitionId: name } })).body
          .workflowInstanceId as string;
        const call = (await runStep(deps, id, { callsApart: true, ownWorkflow: true })).call!;
        const details = {
          instanceId: id,
          recordId: call.recordId,
          activityId: 'call',
          activityType: 'Elsa.Http.SendHttpRequest',
          connectionName: name,
        };
        return { id, details };
      };
      const records = async (id: string) =>
        (
          await h.pool.query<{ activity_id: string; status: string }>(
            'SELECT activity_id, status FROM activity_records WHERE instance_id = $1 ORDER BY id',
            [id],
          )
        ).rows;
      const done = [
        { activity_id: 'start', status: 'Completed' },
        { activity_id: 'call', status: 'Completed' },
        { activity_id: 'after1', status: 'Completed' },
        { activity_id: 'after2', status: 'Completed' },
      ];

      // The outcome recorded and both WriteLines run in the same transaction: one answer, the instance Finished.
      const first = await started();
      expect(await finishOutboundCall(deps, first.details, { ok: true, status: 200 }, { ownWorkflow: true })).toEqual(
        expect.objectContaining({
          hasMoreWork: false,
          executedActivityId: 'after2',
          alsoExecuted: { count: 2, last: ['call', 'after1'] },
          instance: expect.objectContaining({ status: 'Finished', subStatus: 'Finished' }),
        }),
      );
      expect(await records(first.id)).toEqual(done);
      expect(await instance(first.id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });

      // The steps after it fail with an error no retry fixes (here: their definition's read, the second, fails): the call's
      // outcome is still recorded, and the next step runs them (or faults the instance naming them).
      const second = await started();
      let reads = 0;
      const failing = {
        ...deps,
        definitions: {
          byVersionId: (db: Queryable, versionId: string) =>
            reads++ === 1 ? Promise.reject(new Error('not readable')) : h.definitions.byVersionId(db, versionId),
        } as typeof deps.definitions,
      };
      const finished = await finishOutboundCall(
        failing,
        second.details,
        { ok: true, status: 200 },
        { ownWorkflow: true },
      );
      expect(finished).toMatchObject({ hasMoreWork: true, executedActivityId: 'call' });
      expect(finished).not.toHaveProperty('alsoExecuted');
      expect(await records(second.id)).toEqual(done.slice(0, 2));
      expect(await runStep(deps, second.id, { ownWorkflow: true })).toMatchObject({
        hasMoreWork: false,
        executedActivityId: 'after2',
        instance: { status: 'Finished', subStatus: 'Finished' },
      });
      expect(await records(second.id)).toEqual(done);
    } finally {
      await h.startWorker();
    }
  });

  it('is still told what its own step cannot show: a call that faults the instance', async () => {
    const failing = createServer((_req, res) => res.writeHead(503).end('down'));
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    try {
      const name = `own-fault-${run}`;
      await httpConnection(name, failing);
      const id = await startCallInstance(name);
      const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
      // The relay's word carries the incident: the details name it (the step's result alone could not).
      const details = await eventually(async () => {
        const m = await handle
          .query<{ currentDetails?: string }>('__temporal_workflow_metadata')
          .catch(() => undefined);
        return m?.currentDetails?.includes('returned status 503') ? m.currentDetails : undefined;
      }, 'its details to name the incident');
      expect(details).toMatch(/^\*\*Running\/Faulted\*\* · faulted: call: /);
      expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Faulted' });
      const { events } = await handle.fetchHistory();
      expect(events!.filter((e) => e.workflowExecutionSignaledEventAttributes).length).toBeGreaterThanOrEqual(1);
    } finally {
      failing.close();
    }
  });

  it.each([
    ['its outbox row tells it', 'relay'],
    ["migration 013 tells it again (the release before told it 'nothing to run' and deleted its row)", 'migration'],
  ] as const)('makes the call its step started when the workflow task to make it was lost: %s', async (_, told) => {
    const keys: string[] = [];
    const recording = createServer((req, res) => {
      keys.push(String(req.headers['idempotency-key']));
      res.writeHead(200).end('ok');
    });
    await new Promise<void>((resolve) => recording.listen(0, '127.0.0.1', resolve));
    try {
      const name = `lost-${told}-${run}`;
      await httpConnection(name, recording);
      const body = chain(name, [
        writeLine('start', 'started'),
        httpCall(name, 'POST', '/orders'),
        writeLine('end', 'called'),
      ]);
      expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
      let id: string;
      let recordId: string | undefined;
      await h.stopWorker();
      try {
        id = (await h.request('POST', '/workflow-instances', { body: { definitionId: name } })).body
          .workflowInstanceId as string;
        // What the step inside the instance's workflow commits before its workflow task is lost (a worker killed,
        // a task timed out): the call recorded as started, not made. The workflow then replays to what it is told.
        const deps = stepDeps();
        recordId = (await runStep(deps, id, { callsApart: true })).call?.recordId;
        expect(recordId).toBeDefined();
        expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Executing' });
        if (told === 'migration') {
          await h.pool.query('DELETE FROM instance_outbox WHERE instance_id = $1', [id]);
          await h.pool.query(await readFile(MIGRATION_013, 'utf8'));
          const { rows } = await h.pool.query('SELECT 1 FROM instance_outbox WHERE instance_id = $1', [id]);
          expect(rows).toHaveLength(1);
        }
      } finally {
        await h.startWorker();
      }
      // Told that the instance has a call to make, its workflow runs the step again and makes it, with its key.
      const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
      await eventually(() => handle.describe().then(() => true), 'its workflow');
      await eventually(
        async () => ((await instance(id)).status === 'Finished' ? true : undefined),
        'the instance to finish',
        30_000,
      );
      expect(await handle.result()).toMatchObject({ instance: 'Finished/Finished' });
      expect(await instance(id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
      expect(keys).toEqual([`${id}:${recordId}`]);
    } finally {
      recording.close();
    }
  });

  it('runs again in a new run when a revert reopens it, and its closed run is deleted from Temporal', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++)
      ids.push(
        (await h.request('POST', '/workflow-instances', { body: { definitionId } })).body.workflowInstanceId as string,
      );
    const completed = async (planId: string) =>
      eventually(
        async () => ((await h.request('GET', `/alterations/${planId}`)).body.plan.status === 4 ? planId : undefined),
        'the plan to complete',
      );
    const plan = async (alterations: unknown[], workflowInstanceIds: string[]) => {
      const r = await h.request('POST', '/alterations/submit', {
        body: { alterations, filter: { workflowInstanceIds } },
      });
      expect(r.status).toBe(202);
      return completed(r.body.planId as string);
    };
    // Two cancelled, two finished by cancelling what they wait on: their workflows close Canceled and Completed.
    const plans = [
      await plan([{ type: 'Cancel' }], ids.slice(0, 2)),
      await plan([{ type: 'CancelActivity', activityId: 'wait' }], ids.slice(2)),
    ];
    const closed = new Map<string, string>();
    for (const [i, id] of ids.entries()) {
      const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
      const d = await eventually(async () => {
        const now = await handle.describe();
        return now.status.name === (i < 2 ? 'CANCELLED' : 'COMPLETED') ? now : undefined;
      }, 'the ended instance to close its workflow');
      closed.set(id, d.runId);
    }
    // Both plans reverted: the four run again, suspended on their event.
    for (const planId of plans) {
      const r = await h.request('POST', `/alterations/${planId}/revert`, { body: {} });
      expect(r.status).toBe(202);
      await completed(r.body.planId as string);
    }
    for (const id of ids) {
      expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Suspended' });
      const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
      const open = await eventually(async () => {
        const now = await handle.describe();
        return now.status.name === 'RUNNING' && now.searchAttributes.WorkflowInstanceStatus?.[0] === 'Running/Suspended'
          ? now
          : undefined;
      }, 'a new run, Running/Suspended');
      expect(open.runId).not.toBe(closed.get(id));
      // The closed run, whose search attributes still say Finished, is deleted: Temporal knows it no more. Its
      // deletion waits for Temporal's queues to acknowledge the run's close (about 30 s on the dev server).
      await eventually(
        async () =>
          (await h.client.workflow
            .getHandle(instanceWorkflowId(id), closed.get(id))
            .describe()
            .then(() => false)
            .catch((err: unknown) => err instanceof WorkflowNotFoundError)) || undefined,
        'the closed run to be deleted',
        180_000,
      );
    }
    // Each is listed once, Running/Suspended: the open run.
    const quoted = ids.map((id) => JSON.stringify(instanceWorkflowId(id))).join(', ');
    const listedRuns = async () =>
      [
        await temporalCount(`WorkflowId IN (${quoted})`),
        await temporalCount(`WorkflowId IN (${quoted}) AND ExecutionStatus = "Running"`),
        await temporalCount(`WorkflowId IN (${quoted}) AND WorkflowInstanceStatus = "Running/Suspended"`),
      ].join(' ');
    await eventually(async () => ((await listedRuns()) === '4 4 4' ? true : undefined), 'one run each listed', 60_000);
  }, 360_000);

  it('counts as the API counts after starts, triggers, a cancel, a migration, faults, retries and calls', async () => {
    const mixed = `mixed-${run}`;
    const v1 = approvalWithNote(mixed);
    expect((await h.request('POST', '/workflow-definitions', { body: v1 })).status).toBe(201);
    expect(
      (await h.request('POST', '/workflow-definitions', { body: approvalWithNote(mixed, 'v2 done') })).status,
    ).toBe(201);
    const faulty = `faulty-${run}`;
    expect(
      (
        await h.request('POST', '/workflow-definitions', {
          body: chain(faulty, [writeLine('start', 'started'), fault('boom', 'it broke')]),
        })
      ).status,
    ).toBe(201);
    const ending = `ending-${run}`;
    expect(
      (
        await h.request('POST', '/workflow-definitions', {
          body: chain(ending, [writeLine('start', 'started'), finish('end')]),
        })
      ).status,
    ).toBe(201);
    const calling = `calling-${run}`;
    const port = (server.address() as AddressInfo).port;
    expect(
      (
        await h.request('POST', '/connection-configuration', {
          body: {
            name: `local-${run}`,
            connectionType: HTTP,
            connectionConfiguration: { baseUrl: `http://127.0.0.1:${port}` },
          },
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await h.request('POST', '/workflow-definitions', {
          body: chain(
            calling,
            [
              writeLine('start', 'started'),
              httpCall(`local-${run}`),
              event('wait', 'after-call'),
              setVariable('set', 'note', 'called', 'String'),
            ],
            { variables: [{ id: 'note', name: 'Note', typeName: 'String' }] },
          ),
        })
      ).status,
    ).toBe(201);

    const start = async (def: string, correlationId?: string) =>
      (await h.request('POST', '/workflow-instances', { body: { definitionId: def, version: 1, correlationId } })).body
        .workflowInstanceId as string;
    const suspended: string[] = [];
    for (let i = 0; i < 12; i++) suspended.push(await start(mixed, i < 3 ? `go-${run}` : undefined));
    const faulted = [await start(faulty), await start(faulty), await start(faulty)];
    await start(ending);
    const called = [await start(calling), await start(calling)];

    // Three finish through the event; four are cancelled by a plan; three migrate to version 2.
    const trigger = await h.request('POST', '/events/approve/trigger', { body: { correlationId: `go-${run}` } });
    expect(trigger.body.resumedWorkflowInstanceIds).toHaveLength(3);
    const plan = async (alterations: unknown[], ids: string[]) => {
      const r = await h.request('POST', '/alterations/submit', {
        body: { alterations, filter: { workflowInstanceIds: ids } },
      });
      expect(r.status).toBe(202);
      await eventually(
        async () =>
          (await h.request('GET', `/alterations/${r.body.planId}`)).body.plan.status === 4 ? true : undefined,
        'the plan to complete',
      );
    };
    await plan([{ type: 'Cancel' }], suspended.slice(3, 7));
    await plan([{ type: 'Migrate', targetVersion: 2 }], suspended.slice(7, 10));
    // Two faulted instances are retried (and fault again); the calls finish and wait on their event.
    const retried = await h.request('POST', '/alterations/workflows/retry', {
      body: { workflowInstanceIds: faulted.slice(0, 2) },
    });
    expect(retried.status).toBe(200);
    for (const id of called)
      await eventually(async () => ((await instance(id)).subStatus === 'Suspended' ? true : undefined), 'the call');
    await h.request('POST', '/events/after-call/trigger', { body: { workflowInstanceId: called[0] } });

    // What the API says, by status and sub-status.
    const api = new Map<string, number>();
    for (const def of [mixed, faulty, ending, calling]) {
      const page = await h.request('GET', `/workflow-instances?definitionId=${def}&limit=1000`);
      for (const i of page.body.items as { status: string; subStatus: string }[]) {
        const key = `${i.status}/${i.subStatus}`;
        api.set(key, (api.get(key) ?? 0) + 1);
      }
    }
    expect(Object.fromEntries(api)).toEqual({
      'Running/Suspended': 12 - 3 - 4 + 1,
      'Finished/Finished': 3 + 1 + 1,
      'Finished/Cancelled': 4,
      'Running/Faulted': 3,
    });
    const byExecution = {
      Running: (api.get('Running/Suspended') ?? 0) + (api.get('Running/Faulted') ?? 0),
      Completed: api.get('Finished/Finished') ?? 0,
      Canceled: api.get('Finished/Cancelled') ?? 0,
    };
    // The first test's instance is of another definition: count only this test's.
    const ours = `WorkflowDefinitionId IN ("${mixed}", "${faulty}", "${ending}", "${calling}")`;
    let seen: Record<string, number> = {};
    const temporal = await eventually(
      async () => {
        const statuses = [...api.keys(), 'Running/Pending', 'Running/Executing'];
        const counts: Record<string, number> = {};
        seen = counts;
        for (const s of statuses) counts[s] = await temporalCount(`${ours} AND WorkflowInstanceStatus = "${s}"`);
        for (const s of ['Running', 'Completed', 'Canceled', 'Failed', 'Terminated', 'ContinuedAsNew'])
          counts[s] = await temporalCount(`${ours} AND ExecutionStatus = "${s}"`);
        const want = {
          ...Object.fromEntries(api),
          'Running/Pending': 0,
          'Running/Executing': 0,
          ...byExecution,
          Failed: 0,
          Terminated: 0,
          ContinuedAsNew: 0,
        };
        return JSON.stringify(counts) === JSON.stringify({ ...counts, ...want }) ? counts : undefined;
      },
      'Temporal to count as the API does',
      60_000,
    ).catch((err: unknown) => {
      throw new Error(`Temporal counted ${JSON.stringify(seen)}; the API ${JSON.stringify(Object.fromEntries(api))}`, {
        cause: err,
      });
    });
    expect(temporal).toMatchObject({ ...Object.fromEntries(api), ...byExecution });
    // A cancelled instance's workflow ended Canceled through Temporal's cancellation.
    const cancelled = await h.client.workflow.getHandle(instanceWorkflowId(suspended[3]!)).describe();
    expect(cancelled.status.name).toBe('CANCELLED');
    expect(cancelled.searchAttributes.WorkflowInstanceStatus).toEqual(['Finished/Cancelled']);
    // A migrated one's memo names its version.
    const migrated = await h.client.workflow.getHandle(instanceWorkflowId(suspended[7]!)).describe();
    expect(migrated.memo).toMatchObject({ version: 2 });
  }, 180_000);
});

/** The workflow's current details (User Metadata in the UI), once they contain `wanted`; else fails saying what they were. */
async function detailsOf(id: string, wanted: string): Promise<string> {
  const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
  let last = '';
  try {
    return await eventually(async () => {
      const m = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      last = m.currentDetails ?? '';
      return last.includes(wanted) ? last : undefined;
    }, `the details to say "${wanted}"`);
  } catch (err) {
    throw new Error(`The details of ${id} say "${last}", not "${wanted}"`, { cause: err });
  }
}

describe("an instance's page tells its story, as Postgres holds it", () => {
  const story = `story-${run}`;
  beforeAll(async () => {
    const body = chain(
      story,
      [
        writeLine('start', 'started'),
        event('wait', 'approve'),
        event('ship', 'shipped'),
        setVariable('set', 'note', 'note-value-7', 'String'),
      ],
      { variables: [{ id: 'note', name: 'Note', typeName: 'String' }] },
    );
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
  });
  const start = async (def: string, version?: number) =>
    (await h.request('POST', '/workflow-instances', { body: { definitionId: def, ...(version ? { version } : {}) } }))
      .body.workflowInstanceId as string;

  it('names the bookmark it waits on, also when a trigger moved it to the next one without changing its status', async () => {
    const id = await start(story);
    const first = await detailsOf(id, 'waiting on approve (wait)');
    // Resumed, it runs on to its next event inside the trigger's transaction: Running/Suspended before and after.
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    expect(await instance(id)).toMatchObject({
      status: 'Running',
      subStatus: 'Suspended',
      bookmarks: [{ activityId: 'ship', eventName: 'shipped' }],
    });
    const then = await detailsOf(id, 'waiting on shipped (ship)');
    expect([first, then]).toEqual([
      `**Running/Suspended** · suspended, waiting on approve (wait) · ${story} v1 · ran start, wait (Running)`,
      `**Running/Suspended** · suspended, waiting on shipped (ship) · ${story} v1 · ran start, wait, ship (Running)`,
    ]);
  });

  it('reports in its result the steps that ran inside Postgres: start → wait → set, by the start and the triggers', async () => {
    const id = await start(story);
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    await h.request('POST', '/events/shipped/trigger', { body: { workflowInstanceId: id } });
    expect(await instance(id)).toMatchObject({ status: 'Finished', subStatus: 'Finished' });
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    await eventually(() => handle.describe().then(() => true), 'its workflow');
    // Not one of them ran in this workflow: each ran in the transaction of the start or of a trigger.
    expect(await handle.result()).toEqual({
      instance: 'Finished/Finished',
      summary: `finished · ${story} v1 · ran start, wait, ship, set`,
      executedActivityIds: ['start', 'wait', 'ship', 'set'],
      definitionId: story,
      version: 1,
      activityCount: 4,
      waitingOn: [],
      incidentCount: 0,
    });
  });

  it('shows the version a plan migrated it to', async () => {
    const def = `story-migrate-${run}`;
    expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(def) })).status).toBe(201);
    expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(def, 'v2') })).status).toBe(201);
    const id = await start(def, 1);
    await detailsOf(id, `${def} v1`);
    const r = await h.request('POST', '/alterations/submit', {
      body: { alterations: [{ type: 'Migrate', targetVersion: 2 }], filter: { workflowInstanceIds: [id] } },
    });
    expect(r.status).toBe(202);
    expect(await detailsOf(id, `${def} v2`)).toBe(
      `**Running/Suspended** · suspended, waiting on approve (wait) · ${def} v2 · ran start, wait (Running)`,
    );
    expect(await instance(id)).toMatchObject({ version: 2 });
  });

  it("says why it faulted: its incident's message", async () => {
    const def = `story-fault-${run}`;
    const body = chain(def, [writeLine('start', 'started'), fault('charge', 'card declined')]);
    expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
    const id = await start(def);
    expect(await instance(id)).toMatchObject({ status: 'Running', subStatus: 'Faulted' });
    expect(await detailsOf(id, 'card declined')).toBe(
      `**Running/Faulted** · faulted: charge: card declined · ${def} v1 · ran start, charge (Faulted)`,
    );
    // Retried, it faults again inside the retry's transaction: its status unchanged, its new incident told.
    const retried = await h.request('POST', '/alterations/workflows/retry', { body: { workflowInstanceIds: [id] } });
    expect(retried.status).toBe(200);
    expect(await detailsOf(id, 'charge (Faulted), charge (Faulted)')).toBe(
      `**Running/Faulted** · faulted: charge: card declined · ${def} v1 · ran start, charge (Faulted), charge (Faulted)`,
    );
  });

  it('says it was cancelled, and by which plan', async () => {
    const id = await start(story);
    const planId = `story-cancel-${run}`;
    const r = await h.request('POST', '/alterations/submit', {
      body: { id: planId, alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: [id] } },
    });
    expect(r.status).toBe(202);
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    await eventually(
      async () => ((await handle.describe()).status.name === 'CANCELLED' ? true : undefined),
      'the workflow to end Canceled',
    );
    expect(await detailsOf(id, 'cancelled')).toBe(
      `**Finished/Cancelled** · cancelled by plan ${planId} · ${story} v1 · ran start, wait (Canceled)`,
    );
  });

  it('keeps its details small: counts and the last few names, never a variable value', async () => {
    const id = await start(story);
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    await h.request('POST', '/events/shipped/trigger', { body: { workflowInstanceId: id } });
    const handle = h.client.workflow.getHandle(instanceWorkflowId(id));
    await eventually(() => handle.describe().then(() => true), 'its workflow');
    const result = await handle.result();
    // The SetVariable wrote "note-value-7" into `note`: its value is nowhere in what Temporal shows.
    expect(JSON.stringify(result)).not.toContain('note-value-7');
    expect(JSON.stringify(result).length).toBeLessThan(1024);
  });
});
