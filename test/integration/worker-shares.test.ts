import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WAKE_BACKSTOP_MS } from '../../activities/calls.js';
import { createLogger } from '../../src/logger.js';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { installTemporalRuntime } from '../../src/temporal/runtime.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { samples, value } from '../support/metrics.js';
import { localActivities, localResults, recordedHistory } from '../support/plans.js';

import { seedInstances } from '../support/seed.js';
import { approvalWithNote, chain, event, lit, writeLine } from '../support/workflows.js';

/** A step's answer that leaves its instance Finished. */
const finished = (r: unknown) =>
  (r as { instance?: { subStatus?: string } } | undefined)?.instance?.subStatus === 'Finished';

/**
 * Worker capacity is a per-tenant share (contract section 8): outbound calls run in the calls task queue's
 * own slots, at most TENANT_OUTBOUND_CALLS (5) of one tenant at once on a worker, so that a tenant whose
 * calls all hang on an endpoint that never answers takes nothing another tenant's plans and instances need.
 * Real Postgres, real Temporal, a real worker, a local endpoint that holds every request it gets.
 */
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';
let h: Harness;
let server: Server;
let port: number;
const held: { req: IncomingMessage; res: ServerResponse }[] = [];
let inFlight = 0;
let maxInFlight = 0;
let answering = false;
/** What the Temporal SDK logged (warnings and above reach the service's log), as the service writes it. */
const sdkLog: { level: number; msg: string; text: string }[] = [];

beforeAll(async () => {
  // The SDK's runtime is the process's; installed first here, the harness's service uses it as its own.
  await installTemporalRuntime(
    createLogger(
      'debug',
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
            const { level, msg } = JSON.parse(line) as { level: number; msg: string };
            sdkLog.push({ level, msg, text: line });
          }
          cb();
        },
      }),
    ),
  );
  server = createServer((req, res) => {
    req.resume();
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    res.on('close', () => inFlight--);
    if (answering) res.end('{}');
    else held.push({ req, res });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  h = await createHarness();
});
afterAll(async () => {
  answering = true;
  for (const x of held) x.res.end('{}');
  await h?.close();
  await new Promise((resolve) => server?.close(resolve));
});

/** A sample of `GET /metrics` (with its `outcome` label, if given); absent, the test fails. */
async function metric(name: string, outcome?: string): Promise<number> {
  const res = await h.request('GET', '/metrics', { key: h.adminKey });
  expect(res.status).toBe(200);
  const found = value(samples(String(res.body)), name, outcome === undefined ? {} : { outcome });
  if (found === undefined) throw new Error(`GET /metrics has no sample ${name} ${outcome ?? ''}`);
  return found;
}

const instanceOf = async (key: string, id: string) =>
  (await h.request('GET', `/workflow-instances/${id}`, { key })).body as { subStatus: string; status: string };

describe("one tenant's calls hanging on an endpoint that never answers", () => {
  it("take at most its share of the worker: another tenant's plan and new instances run within 10 s", async () => {
    const keyA = await h.keyWith(['*'], 'noisy');
    const keyB = await h.keyWith(['*'], 'quiet');

    // Tenant A: 30 instances, each calling an endpoint that holds the request (timeoutMs: 5 minutes).
    expect(
      (
        await h.request('POST', '/connection-configuration', {
          key: keyA,
          body: {
            name: 'never-answers',
            connectionType: HTTP,
            connectionConfiguration: { baseUrl: `http://127.0.0.1:${port}/`, timeoutMs: 300_000 },
          },
        })
      ).status,
    ).toBe(201);
    const calling = chain('calling', [
      {
        id: 'call',
        type: 'Elsa.Http.SendHttpRequest',
        connection: {
          typeName: `ConnectionProperties<${HTTP}>`,
          expression: { type: 'Literal', value: { connectionName: 'never-answers' } },
        },
        method: lit('POST'),
        path: lit('slow'),
      },
      writeLine('after', 'answered'),
    ]);
    expect((await h.request('POST', '/workflow-definitions', { key: keyA, body: calling })).status).toBe(201);
    const noisy: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await h.request('POST', '/workflow-instances', { key: keyA, body: { definitionId: 'calling' } });
      noisy.push(r.body.workflowInstanceId as string);
    }
    await eventually(async () => (held.length >= 5 ? true : undefined), "tenant A's calls to reach the endpoint");
    // Its share on this worker is 5 calls at once; the others wait in the queue, not in a slot.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(held.length).toBe(5);

    // Tenant B: a plan over 1,000 suspended instances completes within 10 s.
    const def = await h.request('POST', '/workflow-definitions', { key: keyB, body: approvalWithNote('quiet-def') });
    await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1000, tenantId: 'quiet' });
    const started = performance.now();
    const submitted = await h.request('POST', '/alterations/submit', {
      key: keyB,
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
        filter: { definitionIds: ['quiet-def'] },
      },
    });
    expect(submitted.status).toBe(202);
    const plan = await eventually(
      async () => {
        const p = (await h.request('GET', `/alterations/${submitted.body.planId}`, { key: keyB })).body.plan;
        return p?.status === 4 ? p : undefined;
      },
      "tenant B's plan to complete",
      30_000,
    );
    const planSeconds = (performance.now() - started) / 1000;
    expect(plan.jobCounts).toMatchObject({ total: 1000, completed: 1000 });
    expect(planSeconds).toBeLessThan(10);

    // Tenant B's new instances reach their first event within 10 s.
    const waiting = chain('quiet-wait', [writeLine('start', 'started'), event('wait', 'go')]);
    expect((await h.request('POST', '/workflow-definitions', { key: keyB, body: waiting })).status).toBe(201);
    const startedAt = performance.now();
    const quiet: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await h.request('POST', '/workflow-instances', { key: keyB, body: { definitionId: 'quiet-wait' } });
      quiet.push(r.body.workflowInstanceId as string);
    }
    for (const id of quiet) {
      await eventually(
        async () => ((await instanceOf(keyB, id)).subStatus === 'Suspended' ? true : undefined),
        `tenant B's instance ${id} to reach its event`,
        15_000,
      );
    }
    expect((performance.now() - startedAt) / 1000).toBeLessThan(10);
    // Still five of A's calls hang, and no more than five were ever in flight at once.
    expect(held.length).toBe(5);
    expect(maxInFlight).toBe(5);
    // The calls turned back wait in this worker's line, as its metrics say (contract section 9), and none is woken
    // while no place frees.
    await eventually(
      async () => ((await metric('wfa_outbound_calls_waiting')) >= 20 ? true : undefined),
      'the waiting calls to show in wfa_outbound_calls_waiting',
      30_000,
    );
    expect(await metric('wfa_outbound_call_wakes_total', 'signalled')).toBe(0);

    // Once the endpoint answers, A's waiting calls get their turn, five at a time, and all 30 finish: each place
    // that frees wakes a waiting call's workflow (`callPlaceFreed`), long before the timer each waits on at most
    // (WAKE_BACKSTOP_MS, 15 s less its spread) would have brought it back.
    answering = true;
    const answeredAt = performance.now();
    for (const x of held.splice(0)) x.res.end('{}');
    for (const id of noisy) {
      await eventually(
        async () => ((await instanceOf(keyA, id)).subStatus === 'Finished' ? true : undefined),
        `tenant A's instance ${id} to finish`,
        60_000,
      );
    }
    expect(performance.now() - answeredAt).toBeLessThan(0.75 * WAKE_BACKSTOP_MS);
    expect(maxInFlight).toBe(5);

    // Waiting its turn is no failure (attack report L1): no warning (let alone a stack trace) for a call
    // turned back, and each call's activity ran once, its waits being the workflow's (a wake or a timer), not retries.
    const warnings = sdkLog.filter((l) => l.level >= 40);
    expect(warnings.filter((l) => /TENANT_OUTBOUND_CALLS|TenantOutboundShareFull/.test(l.text))).toEqual([]);
    expect(warnings.map((l) => l.msg)).not.toContain('Activity failed');
    let callsStarted = 0;
    let turnBacks = 0;
    let woken = 0;
    for (const id of noisy) {
      const { events } = await h.client.workflow.getHandle(instanceWorkflowId(id)).fetchHistory();
      if (events!.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'callPlaceFreed')) {
        woken++;
        // A run woken so (its timer cancelled, the call asked again) replays as it ran.
        if (woken <= 3)
          await Worker.runReplayHistory(
            { workflowBundle: { codePath: inject('workflowBundlePath') } },
            { events: events! },
            instanceWorkflowId(id),
          );
      }
      const callSchedules = new Set(
        events!
          .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callOutbound')
          .map((e) => String(e.eventId)),
      );
      turnBacks += callSchedules.size - 1;
      for (const e of events!) {
        const started = e.activityTaskStartedEventAttributes;
        if (!started || !callSchedules.has(String(started.scheduledEventId))) continue;
        callsStarted++;
        expect(started.attempt, `instance ${id}: attempt of its call`).toBe(1);
      }
    }
    expect(callsStarted).toBeGreaterThanOrEqual(30);
    // 25 of the 30 calls waited their turn.
    expect(turnBacks).toBeGreaterThanOrEqual(25);
    // Those that waited were woken by the worker when a place freed (a few may have asked on their own timer or
    // found a place while waiting inside the worker; without the wakes, none is woken).
    expect(woken).toBeGreaterThanOrEqual(10);
    // Each wake counted (a workflow signalled at least once for each run that shows the signal), and the line empty.
    expect(await metric('wfa_outbound_call_wakes_total', 'signalled')).toBeGreaterThanOrEqual(woken);
    expect(await metric('wfa_outbound_call_wakes_total', 'failed')).toBe(0);
    expect(await metric('wfa_outbound_calls_waiting')).toBe(0);
  }, 150_000);
});

describe("one tenant's calls made inside workflow tasks, hanging until their timeout", () => {
  it("hold at most its share with its calls on the queue: another tenant's inline calls are made meanwhile", async () => {
    // A connection whose timeout (10 s) is within WORKER_INLINE_CALL_MAX_MS: its calls are local activities of
    // the main worker, each holding a workflow task and a local activity slot while its endpoint takes. The tenant
    // share (TENANT_OUTBOUND_CALLS, 5) counts them together with the tenant's calls on the calls task queue (a
    // connection with a 5-minute timeout): one counter for both workers.
    const hanging: ServerResponse[] = [];
    let hangingNow = 0;
    let mostHanging = 0;
    let answered = 0;
    const endpoint = createServer((req, res) => {
      req.resume();
      if (req.url?.startsWith('/hang')) {
        hangingNow++;
        mostHanging = Math.max(mostHanging, hangingNow);
        res.on('close', () => hangingNow--);
        hanging.push(res);
      } else {
        answered++;
        res.end('{}');
      }
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/`;
    try {
      const keyA = await h.keyWith(['*'], 'inline-noisy');
      const keyB = await h.keyWith(['*'], 'inline-quiet');
      for (const [key, name, timeoutMs] of [
        [keyA, 'hangs', 10_000],
        [keyA, 'hangs-queued', 300_000],
        [keyB, 'answers', 10_000],
      ] as const) {
        const made = await h.request('POST', '/connection-configuration', {
          key,
          body: { name, connectionType: HTTP, connectionConfiguration: { baseUrl, timeoutMs } },
        });
        expect(made.status).toBe(201);
        const calling = chain(`inline-${name}`, [
          {
            id: 'call',
            type: 'Elsa.Http.SendHttpRequest',
            connection: {
              typeName: `ConnectionProperties<${HTTP}>`,
              expression: { type: 'Literal', value: { connectionName: name } },
            },
            method: lit('POST'),
            path: lit(name.startsWith('hangs') ? 'hang' : 'ok'),
          },
          writeLine('after', 'answered'),
        ]);
        expect((await h.request('POST', '/workflow-definitions', { key, body: calling })).status).toBe(201);
      }
      // Tenant A: 30 instances whose calls hang, half of them made inline, half on the calls task queue.
      const noisyInline: string[] = [];
      for (let i = 0; i < 30; i++) {
        const definitionId = i % 2 === 0 ? 'inline-hangs' : 'inline-hangs-queued';
        const r = await h.request('POST', '/workflow-instances', { key: keyA, body: { definitionId } });
        expect(r.status).toBe(202);
        if (i % 2 === 0) noisyInline.push(r.body.workflowInstanceId as string);
      }
      await eventually(async () => (hanging.length >= 5 ? true : undefined), "tenant A's calls to reach the endpoint");
      // Tenant B: 20 instances whose calls answer at once, all made and Finished while A's calls still hang.
      const quiet: string[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await h.request('POST', '/workflow-instances', {
          key: keyB,
          body: { definitionId: 'inline-answers' },
        });
        quiet.push(r.body.workflowInstanceId as string);
      }
      for (const id of quiet) {
        await eventually(
          async () => ((await instanceOf(keyB, id)).subStatus === 'Finished' ? true : undefined),
          `tenant B's instance ${id} to finish`,
          15_000,
        );
      }
      expect(answered).toBe(20);
      expect(hangingNow).toBeGreaterThan(0);
      expect(mostHanging).toBe(5);
      // B's calls were made inside their workflow tasks, as A's are, none on the calls task queue: most by the step
      // that started each (its tenant had a place free), one local activity; the others (20 at once against B's own
      // share of 5) as a local activity of their own once a place freed. Each history read once it shows the
      // instance Finished (its markers reach the history when the workflow task completes, after Postgres has it).
      const histories = await Promise.all(
        quiet.map((id) =>
          recordedHistory(
            h,
            instanceWorkflowId(id),
            (e) => localResults(e).some(finished),
            `${id} Finished in its history`,
          ),
        ),
      );
      for (const events of histories) expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
      expect(
        histories.filter((events) => localActivities(events).join() === 'executeInstanceStep').length,
      ).toBeGreaterThan(0);
      // A's inline calls past its share found no place in their steps: their workflows asked for them
      // (`callOutbound`, turned back and waiting for a place), as a call the step could not make is asked for.
      // (Read until one shows it: a turned-back ask's marker reaches the history when its workflow task completes.)
      const asked = await eventually(async () => {
        const found = await Promise.all(
          noisyInline.map(async (id) => {
            const history = await h.client.workflow.getHandle(instanceWorkflowId(id)).fetchHistory();
            return localActivities(history.events!).includes('callOutbound');
          }),
        );
        return found.some(Boolean) ? found : undefined;
      }, "a call of tenant A's asked for by its workflow");
      expect(asked.filter(Boolean).length).toBeGreaterThan(0);
    } finally {
      for (const res of hanging.splice(0)) res.end('{}');
      endpoint.closeAllConnections();
      await new Promise((resolve) => endpoint.close(resolve));
    }
  }, 60_000);
});
