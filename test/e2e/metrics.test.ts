import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { type Sample, samples, value } from '../support/metrics.js';
import { approvalWithNote, chain, event, lit, writeLine } from '../support/workflows.js';

/**
 * Contract section 9 on a real service (Postgres, Temporal, a worker): `GET /metrics` counts what the
 * service did (plan jobs, an event stream, requests by route template, outbound calls, pools, the Temporal
 * SDK's worker metrics) with no id in any label, behind its permission; `/health/live` and `/health/ready`
 * answer, ready says 503 when the worker stops; and neither probes nor scrapes are logged at info.
 */
const run = Math.random().toString(36).slice(2, 8);
const HTTP = 'Elsa.Connections.Http.HttpConnectionConfiguration';

let h: Harness;
let closed = false;
let endpoint: Server;
let endpointUrl: string;

async function scrape(key: string | null = h.adminKey): Promise<{ text: string; all: Sample[] }> {
  const res = await h.request('GET', '/metrics', { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = res.body as string;
  return { text, all: samples(text) };
}

/** Reads an event stream's body until `until` appears in it (or it ends); answers what was read. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, until: string): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes(until)) {
    const { done, value: chunk } = await reader.read();
    if (done) break;
    text += decoder.decode(chunk, { stream: true });
  }
  return text;
}

async function publishAndSeed(definitionId: string, count: number): Promise<string[]> {
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote(definitionId) });
  expect(def.status).toBe(201);
  return seedInstances(h.pool, { definitionVersionId: def.body.id, count, variables: { amount: 0 } });
}

const planOf = async (planId: string) => (await h.request('GET', `/alterations/${planId}`)).body;

beforeAll(async () => {
  endpoint = createServer((_req, res) => res.end('{}'));
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  endpointUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/api`;
  // A trigger over more than 2 instances records their resumptions (the engine queues' test below).
  h = await createHarness({
    alterations: { batchSize: 10, window: 1, batchesPerRun: 500 },
    config: { triggerInlineInstances: 2 },
  });
});
afterAll(async () => {
  if (!closed) await h?.close();
  await new Promise((resolve) => endpoint?.close(resolve));
});

describe('GET /metrics', () => {
  it('counts a plan, its event stream, the requests by route template, an outbound call, the pools and the SDK', async () => {
    const planId = `metrics-${run}`;
    const instanceIds = await publishAndSeed(`metrics-def-${run}`, 60);
    const submitted = await h.request('POST', '/alterations/submit', {
      body: {
        id: planId,
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
        filter: { definitionIds: [`metrics-def-${run}`] },
        rollout: { canary: 20 },
      },
    });
    expect(submitted.status).toBe(202);

    // A stream open on the plan while it waits after its canary.
    const stream = await h.app.request(`/alterations/${planId}/events`, {
      headers: { authorization: `ApiKey ${h.adminKey}` },
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    expect(await readUntil(reader, 'event: progress')).toContain('event: progress');
    await eventually(async () => ((await planOf(planId)).plan.status === 7 ? true : undefined), 'the canary pause');
    const during = await scrape();
    expect(value(during.all, 'wfa_event_streams_open')).toBe(1);
    expect(value(during.all, 'wfa_plan_jobs_total', { status: 'Completed' })).toBe(20);

    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(202);
    const rest = await readUntil(reader, 'event: done');
    expect(rest).toContain('event: done');
    await reader.cancel();

    // A second plan whose every job fails: its variable does not exist.
    const failing = `metrics-failing-${run}`;
    await publishAndSeed(`metrics-failing-def-${run}`, 5);
    await h.request('POST', '/alterations/submit', {
      body: {
        id: failing,
        alterations: [{ type: 'ModifyVariable', variableId: 'missing', value: 1 }],
        filter: { definitionIds: [`metrics-failing-def-${run}`] },
      },
    });
    await eventually(async () => ((await planOf(failing)).plan.status === 4 ? true : undefined), 'the failing plan');

    // One outbound call, answered 200.
    const connection = await h.request('POST', '/connection-configuration', {
      body: {
        name: `metrics-endpoint-${run}`,
        connectionType: HTTP,
        connectionConfiguration: { baseUrl: endpointUrl },
      },
    });
    expect(connection.status).toBe(201);
    const calling = chain(`metrics-call-${run}`, [
      {
        id: 'call',
        type: 'Elsa.Http.SendHttpRequest',
        version: 1,
        connection: {
          typeName: `ConnectionProperties<${HTTP}>`,
          expression: { type: 'Literal', value: { connectionName: `metrics-endpoint-${run}` } },
        },
        method: lit('GET'),
        path: lit('/ping'),
      },
    ]);
    expect((await h.request('POST', '/workflow-definitions', { body: calling })).status).toBe(201);
    const started = await h.request('POST', '/workflow-instances', { body: { definitionId: `metrics-call-${run}` } });
    const callerId = started.body.workflowInstanceId as string;
    await eventually(
      async () =>
        (await h.request('GET', `/workflow-instances/${callerId}`)).body.subStatus === 'Finished' ? true : undefined,
      'the calling instance to finish',
    );
    expect((await h.request('GET', '/no/such/path')).status).toBe(404);

    const plan = (await planOf(planId)).plan;
    const failed = (await planOf(failing)).plan;
    expect(plan.jobCounts.completed).toBe(60);
    expect(failed.jobCounts.failed).toBe(5);

    const after = await eventually(async () => {
      const s = await scrape();
      return value(s.all, 'wfa_event_streams_open') === 0 ? s : undefined;
    }, 'the stream to be counted closed');
    const { text, all } = after;
    expect(value(all, 'wfa_plan_jobs_total', { status: 'Completed' })).toBe(plan.jobCounts.completed);
    expect(value(all, 'wfa_plan_jobs_total', { status: 'Failed' })).toBe(failed.jobCounts.failed);
    expect(value(all, 'wfa_plan_batches_in_flight')).toBe(0);
    expect(value(all, 'wfa_outbound_calls_total', { outcome: 'success' })).toBe(1);
    expect(value(all, 'wfa_outbound_calls_total', { outcome: 'timeout' })).toBe(0);
    expect(value(all, 'wfa_outbound_call_duration_seconds_count', { outcome: 'success' })).toBe(1);

    // Requests by route template: the plan reads, the stream, the 404 as "unmatched"; never a raw path.
    const reads = value(all, 'wfa_http_requests_total', {
      route: '/alterations/{planId}',
      method: 'GET',
      status: '200',
    });
    expect(reads).toBeGreaterThanOrEqual(3);
    expect(
      value(all, 'wfa_http_request_duration_seconds_count', { route: '/alterations/{planId}', method: 'GET' }),
    ).toBeGreaterThanOrEqual(reads!);
    expect(
      value(all, 'wfa_http_requests_total', { route: '/alterations/{planId}/events', method: 'GET', status: '200' }),
    ).toBe(1);
    expect(value(all, 'wfa_http_requests_total', { route: '/alterations/submit', method: 'POST', status: '202' })).toBe(
      2,
    );
    expect(value(all, 'wfa_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    const routes = new Set(all.filter((s) => s.name === 'wfa_http_requests_total').map((s) => s.labels.route!));
    for (const route of routes) expect(route === 'unmatched' || route.startsWith('/'), route).toBe(true);
    expect([...routes].filter((r) => r.includes('no/such'))).toEqual([]);
    for (const id of [planId, failing, callerId, ...instanceIds]) expect(text, id).not.toContain(id);

    // The pools, read at scrape time.
    for (const pool of ['api', 'worker', 'calls']) {
      for (const state of ['total', 'idle', 'waiting'])
        expect(value(all, 'wfa_db_pool_connections', { pool, state }), `${pool} ${state}`).toBeGreaterThanOrEqual(0);
    }
    expect(value(all, 'wfa_db_pool_connections', { pool: 'api', state: 'total' })).toBeGreaterThan(0);
    expect(value(all, 'wfa_db_pool_connections', { pool: 'worker', state: 'total' })).toBeGreaterThan(0);

    // The process (prom-client's defaults) and the Temporal SDK's worker metrics, under their own names.
    expect(value(all, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(value(all, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    const sdk = all.filter((s) => s.name.startsWith('temporal_'));
    expect(sdk.some((s) => s.name === 'temporal_request' && s.value > 0)).toBe(true);
    expect(
      sdk.some((s) => s.name === 'temporal_workflow_task_execution_latency_count' && s.value > 0),
      'temporal_workflow_task_execution_latency',
    ).toBe(true);
    expect(sdk.some((s) => s.name === 'temporal_worker_task_slots_available')).toBe(true);
    // Each metric family once: the service's and the SDK's expositions share no name.
    const types = text.split('\n').filter((l) => l.startsWith('# TYPE '));
    expect(new Set(types).size).toBe(types.length);
  });

  it("reports the engine's queues: changes not yet told and resumptions not yet run wait while the worker is stopped, and drain when it runs", async () => {
    const definitionId = `metrics-wait-${run}`;
    const eventName = `metrics-go-${run}`;
    const def = chain(definitionId, [
      writeLine('start', 'started'),
      event('wait', eventName),
      writeLine('end', 'went'),
    ]);
    expect((await h.request('POST', '/workflow-definitions', { body: def })).status).toBe(201);
    const startOne = async () => {
      const res = await h.request('POST', '/workflow-instances', { body: { definitionId } });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      return res.body.workflowInstanceId as string;
    };
    const ids = [await startOne(), await startOne(), await startOne()];
    const queues = async () => {
      const { all } = await scrape();
      return {
        outbox: value(all, 'wfa_engine_backlog_rows', { queue: 'outbox' }),
        resumptions: value(all, 'wfa_engine_backlog_rows', { queue: 'resumptions' }),
        outboxAge: value(all, 'wfa_engine_backlog_oldest_seconds', { queue: 'outbox' }),
        resumptionsAge: value(all, 'wfa_engine_backlog_oldest_seconds', { queue: 'resumptions' }),
      };
    };
    const idle = { outbox: 0, resumptions: 0, outboxAge: 0, resumptionsAge: 0 };
    await eventually(async () => {
      const q = await queues();
      return q.outbox === 0 ? q : undefined;
    }, 'the new instances told to their workflows');

    await h.stopWorker();
    let stopped = true;
    try {
      // Three waiting instances, more than the 2 a trigger resumes in its request: recorded, not run.
      const triggered = await h.request('POST', `/events/${eventName}/trigger`, { body: {} });
      expect(triggered.status).toBe(200);
      expect([...triggered.body.resumedWorkflowInstanceIds].sort()).toEqual([...ids].sort());
      const late = await startOne();
      await new Promise((r) => setTimeout(r, 1_100));
      const waiting = await queues();
      expect(waiting.resumptions).toBe(3);
      expect(waiting.outbox).toBe(1);
      expect(waiting.resumptionsAge).toBeGreaterThanOrEqual(1);
      expect(waiting.outboxAge).toBeGreaterThanOrEqual(1);
      expect(waiting.resumptionsAge).toBeLessThan(60);

      await h.startWorker();
      stopped = false;
      await eventually(async () => {
        const q = await queues();
        return q.outbox === 0 && q.resumptions === 0 ? q : undefined;
      }, 'the queues to drain');
      expect(await queues()).toEqual(idle);
      for (const id of ids)
        expect((await h.request('GET', `/workflow-instances/${id}`)).body.subStatus, id).toBe('Finished');
      expect((await h.request('GET', `/workflow-instances/${late}`)).body.subStatus).toBe('Suspended');
    } finally {
      if (stopped) await h.startWorker();
    }
  });

  it('needs service/metrics:view in the default tenant: 401 without credentials, 403 without it', async () => {
    const anonymous = await h.request('GET', '/metrics', { key: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBeTruthy();
    const lacking = await h.request('GET', '/metrics', { key: await h.keyWith(['alterations:view']) });
    expect(lacking.status).toBe(403);
    expect(lacking.body.detail).toContain('"service/metrics:view"');
    for (const grant of ['service/metrics:view', 'service/metrics:*', '*:view', '*'])
      expect((await h.request('GET', '/metrics', { key: await h.keyWith([grant]) })).status, grant).toBe(200);
    // Another tenant's principal would read every tenant's counts: refused, whatever it holds.
    for (const grant of ['service/metrics:view', '*']) {
      const other = await h.request('GET', '/metrics', { key: await h.keyWith([grant], `metrics-tenant-${run}`) });
      expect(other.status, grant).toBe(403);
      expect(other.body.detail).toContain('default tenant');
    }
  });

  it('is in the OpenAPI document with its permission, beside the probes', async () => {
    const doc = (await h.request('GET', '/openapi.json', { key: null })).body;
    expect(doc.paths['/metrics'].get['x-permission']).toEqual({ structured: 'service/metrics:view', legacy: '*' });
    expect(doc.paths['/metrics'].get.responses['200'].content['text/plain']).toBeDefined();
    for (const path of ['/health/live', '/health/ready']) expect(doc.paths[path].get['x-permission']).toBe('public');
    const permissions = (await h.request('GET', '/identity/permissions')).body;
    expect(permissions.structured).toContain('service/metrics:view');
  });
});

describe('the health probes', () => {
  it('answer live and ready without credentials; ready is 503 naming the worker while it is stopped', async () => {
    const live = await h.request('GET', '/health/live', { key: null });
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });
    const ready = await h.request('GET', '/health/ready', { key: null });
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ok', checks: { postgres: 'ok', temporal: 'ok', worker: 'ok' } });

    await h.stopWorker();
    try {
      const stopped = await h.request('GET', '/health/ready', { key: null });
      expect(stopped.status).toBe(503);
      expect(stopped.body).toEqual({
        status: 'unavailable',
        checks: { postgres: 'ok', temporal: 'ok', worker: 'unavailable' },
      });
      // Live checks nothing, and /health stays as it was: Postgres and Temporal only.
      expect((await h.request('GET', '/health/live', { key: null })).status).toBe(200);
      expect((await h.request('GET', '/health', { key: null })).status).toBe(200);
    } finally {
      await h.startWorker();
    }
    expect((await h.request('GET', '/health/ready', { key: null })).status).toBe(200);
  });

  it('and the scrapes are not logged at info; a failing one is a warning', async () => {
    await h.request('GET', '/health', { key: null });
    await scrape();
    await h.request('GET', '/metrics', { key: null });
    const lines = h.logs.filter(
      (l) => l.msg === 'request' && /^\/(health(\/live|\/ready)?|metrics)$/.test(String(l.path)),
    );
    const paths = new Set(lines.map((l) => `${String(l.path)} ${String(l.status)}`));
    for (const seen of ['/health 200', '/health/live 200', '/health/ready 200', '/health/ready 503', '/metrics 200'])
      expect(paths, seen).toContain(seen);
    for (const line of lines) {
      expect(line.level, `${String(line.path)} ${String(line.status)}`).not.toBe(30);
      expect(line.level).toBe(Number(line.status) < 400 ? 20 : 40);
    }
    // Other requests stay at info.
    expect(h.logs.some((l) => l.msg === 'request' && l.path === `/alterations/metrics-${run}` && l.level === 30)).toBe(
      true,
    );
  });
});

describe("a service started after the process's last one stopped", () => {
  it("serves the SDK's metrics again (the SDK shut its runtime down meanwhile), publicly with METRICS_PUBLIC=true", async () => {
    // The SDK shuts its runtime down with the process's last Temporal connection.
    await h.close();
    closed = true;
    const open = await createHarness({ metricsPublic: true });
    try {
      const res = await open.request('GET', '/metrics', { key: null });
      expect(res.status).toBe(200);
      expect(res.body).toContain('wfa_http_requests_total');
      expect(res.body).toMatch(/^temporal_num_pollers\{.*\} [1-9]/m);
      const doc = (await open.request('GET', '/openapi.json', { key: null })).body;
      expect(doc.paths['/metrics'].get['x-permission']).toBe('public');
      expect(doc.paths['/metrics'].get.responses['401']).toBeUndefined();
    } finally {
      await open.close();
    }
  });
});
