import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { chain, connect, event, lit, writeLine } from '../support/workflows.js';

/**
 * Long runs of pure steps past the inline cap (issue 35): the first MAX_INLINE_STEPS run in the request, the rest
 * in the instance's step activity, in chunks (src/engine/executor.ts, `continuePureSteps`), never one activity
 * call per step. Timings are the bench's (bench/pure-steps.ts); here: every step once, in order, and few calls.
 */
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
const CHAIN = 4000;
const FANOUT = 2000;

let h: Harness;
let server: Server;
let baseUrl: string;
const received: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received.push(req.url!);
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  // A 4,000-step definition is about 600 kB of JSON.
  h = await createHarness({ config: { maxBodyBytes: 8 * 1024 * 1024 } });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await new Promise((resolve) => server?.close(resolve));
});

async function publish(def: unknown) {
  const r = await h.request('POST', '/workflow-definitions', { body: def });
  expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(201);
}

async function start(definitionId: string): Promise<string> {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  expect(r.status).toBe(202);
  return r.body.workflowInstanceId as string;
}

async function instanceRow(id: string) {
  const { rows } = await h.pool.query<{ status: string; sub_status: string; bookmarks: number }>(
    'SELECT status, sub_status, jsonb_array_length(bookmarks) AS bookmarks FROM workflow_instances WHERE id = $1',
    [id],
  );
  return rows[0]!;
}

/** The step activities the instance's workflow ran (activity tasks and local activity markers). */
async function stepCalls(id: string): Promise<number> {
  const history = await h.client.workflow.getHandle(instanceWorkflowId(id)).fetchHistory();
  let n = 0;
  for (const e of history.events ?? []) {
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'executeInstanceStep') n++;
    if (e.markerRecordedEventAttributes?.markerName === 'core_local_activity') {
      const data = e.markerRecordedEventAttributes.details?.data?.payloads?.[0]?.data;
      const type = data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }) : undefined;
      if (type?.activity_type === 'executeInstanceStep') n++;
    }
  }
  return n;
}

const lines = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => writeLine(`w${i}`, `${prefix} ${i}`));

describe('a long run of pure steps', () => {
  it(`runs a chain of ${CHAIN.toLocaleString('en')} WriteLine steps to the end: every journal line in order, every record`, async () => {
    await publish(chain('long-chain', lines(CHAIN, 'line')));
    const id = await start('long-chain');
    await eventually(
      async () => ((await instanceRow(id)).status === 'Finished' ? true : undefined),
      'the chain to finish',
      120_000,
    );
    expect(await instanceRow(id)).toMatchObject({ status: 'Finished', sub_status: 'Finished' });
    const { rows: journal } = await h.pool.query<{ activity_id: string; message: string }>(
      'SELECT activity_id, message FROM journal_entries WHERE instance_id = $1 ORDER BY id',
      [id],
    );
    expect(journal).toHaveLength(CHAIN);
    journal.forEach((line, i) => expect(line).toEqual({ activity_id: `w${i}`, message: `line ${i}` }));
    const { rows: records } = await h.pool.query<{ activity_id: string; status: string }>(
      'SELECT activity_id, status FROM activity_records WHERE instance_id = $1 ORDER BY id',
      [id],
    );
    expect(records).toHaveLength(CHAIN);
    records.forEach((r, i) => expect(r).toEqual({ activity_id: `w${i}`, status: 'Completed' }));
    // The workflow is told it finished and completes; its steps ran in a few calls, not one per step.
    await h.client.workflow.getHandle(instanceWorkflowId(id)).result();
    expect(await stepCalls(id)).toBeLessThan(100);
  }, 180_000);

  it(`fans out to ${FANOUT.toLocaleString('en')} Event steps and reaches all their bookmarks`, async () => {
    const events = Array.from({ length: FANOUT }, (_, i) => event(`e${i}`, `ev${i}`));
    await publish({
      definitionId: 'wide-fanout',
      root: {
        type: 'Elsa.Flowchart',
        id: 'flow1',
        activities: [writeLine('start', 'fan out'), ...events],
        connections: events.map((e) => connect('start', e.id)),
      },
    });
    const id = await start('wide-fanout');
    await eventually(
      async () => ((await instanceRow(id)).bookmarks === FANOUT ? true : undefined),
      'all bookmarks',
      120_000,
    );
    expect(await instanceRow(id)).toMatchObject({ status: 'Running', sub_status: 'Suspended', bookmarks: FANOUT });
    const { rows } = await h.pool.query<{ n: number; distinct: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT activity_id)::int AS distinct FROM activity_records
        WHERE instance_id = $1 AND activity_type = 'Elsa.Event'`,
      [id],
    );
    expect(rows[0]).toEqual({ n: FANOUT, distinct: FANOUT });
    expect(await stepCalls(id)).toBeLessThan(100);
  }, 180_000);

  it('ends a long chain in an outbound call that is made once', async () => {
    const created = await h.request('POST', '/connection-configuration', {
      body: { name: 'after-chain', connectionType: HTTP, connectionConfiguration: { baseUrl } },
    });
    expect(created.status).toBe(201);
    const call = {
      id: 'call',
      type: 'Elsa.Http.SendHttpRequest',
      version: 1,
      connection: {
        typeName: `ConnectionProperties<${HTTP}>`,
        expression: { type: 'Literal', value: { connectionName: 'after-chain' } },
      },
      method: lit('POST'),
      path: lit('/after-chain'),
    };
    await publish(chain('chain-then-call', [...lines(1200, 'step'), call, writeLine('after', 'called')]));
    const id = await start('chain-then-call');
    await eventually(
      async () => ((await instanceRow(id)).status === 'Finished' ? true : undefined),
      'the chain and its call to finish',
      120_000,
    );
    expect(await instanceRow(id)).toMatchObject({ status: 'Finished', sub_status: 'Finished' });
    expect(received).toEqual(['/api/after-chain']);
    const { rows } = await h.pool.query<{ activity_id: string; status: string }>(
      `SELECT activity_id, status FROM activity_records WHERE instance_id = $1 AND activity_id IN ('w1199', 'call', 'after')
        ORDER BY id`,
      [id],
    );
    expect(rows).toEqual([
      { activity_id: 'w1199', status: 'Completed' },
      { activity_id: 'call', status: 'Completed' },
      { activity_id: 'after', status: 'Completed' },
    ]);
    const { rows: journal } = await h.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM journal_entries WHERE instance_id = $1',
      [id],
    );
    expect(journal[0]!.n).toBe(1201);
    await new Promise((r) => setTimeout(r, 500));
    expect(received).toHaveLength(1);
  }, 180_000);
});
