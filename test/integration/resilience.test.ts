import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { localActivities, recordedHistory } from '../support/plans.js';
import { chain, lit, writeLine } from '../support/workflows.js';

const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
let h: Harness;
let server: Server;
let failuresLeft = 0;
let calls = 0;
const methods: string[] = [];

const call = (strategy?: string, connectionName = 'flaky') => ({
  id: 'call',
  type: 'Elsa.Http.SendHttpRequest',
  ...(strategy ? { resilienceStrategyId: strategy } : {}),
  connection: {
    typeName: `ConnectionProperties<${HTTP}>`,
    expression: { type: 'Literal', value: { connectionName } },
  },
  path: lit('/ping'),
});

/** The durations of the timers a history started, in milliseconds. */
const timerDurations = (
  events: {
    timerStartedEventAttributes?: { startToFireTimeout?: { seconds?: unknown; nanos?: number | null } | null } | null;
  }[],
) =>
  events.flatMap((e) =>
    e.timerStartedEventAttributes
      ? [
          Number(e.timerStartedEventAttributes.startToFireTimeout!.seconds ?? 0) * 1000 +
            Number(e.timerStartedEventAttributes.startToFireTimeout!.nanos ?? 0) / 1e6,
        ]
      : [],
  );

async function runToEnd(definitionId: string) {
  const r = await h.request('POST', '/workflow-instances', { body: { definitionId } });
  const id = r.body.workflowInstanceId as string;
  return eventually(
    async () => {
      const i = (await h.request('GET', `/workflow-instances/${id}`)).body;
      return ['Finished', 'Faulted'].includes(i.subStatus) ? i : undefined;
    },
    'the instance to finish or fault',
    30_000,
  );
}

beforeAll(async () => {
  server = createServer((req, res) => {
    calls++;
    methods.push(req.method!);
    res.statusCode = failuresLeft-- > 0 ? 503 : 200;
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h = await createHarness();
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The same endpoint through a connection whose timeout (60 s) is past WORKER_INLINE_CALL_MAX_MS: its calls go
  // through the calls task queue.
  for (const [name, timeout] of [
    ['flaky', {}],
    ['flaky-queued', { timeoutMs: 60_000 }],
  ] as const) {
    const made = await h.request('POST', '/connection-configuration', {
      body: { name, connectionType: HTTP, connectionConfiguration: { baseUrl, ...timeout } },
    });
    expect(made.status).toBe(201);
  }
  for (const [id, strategy, connection] of [
    ['with-retries', 'retry-3-quick', 'flaky'],
    ['with-retries-queued', 'retry-3-quick', 'flaky-queued'],
    ['without-retries', undefined, 'flaky'],
  ] as const) {
    const r = await h.request('POST', '/workflow-definitions', {
      body: chain(id, [call(strategy, connection), writeLine('done', 'done')]),
    });
    expect(r.status).toBe(201);
  }
});
afterAll(async () => {
  await h?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('resilience strategies', () => {
  it('are listed for any signed-in principal', async () => {
    const r = await h.request('GET', '/resilience/strategies', { key: await h.keyWith([]) });
    expect(r.status).toBe(200);
    expect(r.body.items).toContainEqual({
      id: 'retry-3-quick',
      displayName: expect.any(String),
      maxAttempts: 3,
      initialIntervalMs: 200,
      backoffCoefficient: 2,
      maxIntervalMs: 1000,
    });
    expect(r.body.totalCount).toBe(r.body.items.length);
  });

  it('retry a faulting activity under the strategy; failed attempts leave no trace', async () => {
    failuresLeft = 2;
    calls = 0;
    const i = await runToEnd('with-retries');
    expect(i.subStatus).toBe('Finished');
    expect(calls).toBe(3);
    // The activity names no method: the input's default value (GET) was used.
    expect(methods.slice(-3)).toEqual(['GET', 'GET', 'GET']);
    expect(i.incidentCount).toBe(0);
    expect(i.activityRecords.map((r: { activityId: string; status: string }) => `${r.activityId}:${r.status}`)).toEqual(
      ['call:Completed', 'done:Completed'],
    );
    // The workflow made the call three times inside its workflow tasks (its connection answers within
    // WORKER_INLINE_CALL_MAX_MS: a local activity each, no activity task), waiting the strategy's backoff
    // (200 ms, then 400 ms) between attempts on durable timers.
    // (Read once the task that recorded the call's outcome completed: the instance is Finished in Postgres a moment
    // before its markers are in the history.)
    const events = await recordedHistory(
      h,
      `workflow-instance-${i.id}`,
      (e) => localActivities(e).includes('finishOutboundCall'),
      "the call's outcome in the history",
    );
    expect(localActivities(events).filter((type) => type === 'callOutbound')).toHaveLength(3);
    expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
    expect(timerDurations(events)).toEqual([200, 400]);
  });

  it('retry a call on the calls task queue the same way, its connection answering within more than the inline bound', async () => {
    failuresLeft = 2;
    calls = 0;
    const i = await runToEnd('with-retries-queued');
    expect(i.subStatus).toBe('Finished');
    expect(calls).toBe(3);
    // Three activity tasks on the calls task queue, the strategy's backoff between them on durable timers.
    const events = await recordedHistory(
      h,
      `workflow-instance-${i.id}`,
      (e) => localActivities(e).includes('finishOutboundCall'),
      "the call's outcome in the history",
    );
    const callsMade = events.filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callOutbound',
    );
    expect(callsMade).toHaveLength(3);
    expect(callsMade[0]!.activityTaskScheduledEventAttributes!.taskQueue!.name).toBe(`${h.taskQueue}-calls`);
    expect(localActivities(events)).not.toContain('callOutbound');
    expect(timerDurations(events)).toEqual([200, 400]);
  });

  it('record the fault as an incident once the attempts run out', async () => {
    failuresLeft = 100;
    calls = 0;
    const i = await runToEnd('with-retries');
    failuresLeft = 0;
    expect(i.subStatus).toBe('Faulted');
    expect(calls).toBe(3);
    expect(i.incidents).toHaveLength(1);
    expect(i.incidents[0].message).toBe('HTTP request through connection "flaky" returned status 503');
    expect(i.activityRecords.map((r: { status: string }) => r.status)).toEqual(['Faulted']);
  });

  it('are not applied to an activity without one: it faults at once', async () => {
    failuresLeft = 1;
    calls = 0;
    const i = await runToEnd('without-retries');
    expect(i.subStatus).toBe('Faulted');
    expect(calls).toBe(1);
  });

  it('must be known when a definition names one', async () => {
    const r = await h.request('POST', '/workflow-definitions', {
      body: chain('bad-strategy', [call('retry-forever')]),
    });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].path).toBe('/root/activities/0/resilienceStrategyId');
  });
});
