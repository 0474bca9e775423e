import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createClient, type PlanEvent, ProblemError } from '../../src/client/index.js';
import { createService, type Service, type ServiceOverrides } from '../../src/service/index.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

let h: Harness;
let node2: Service;
let node3: Service;
const run = Math.random().toString(36).slice(2, 8);
let versionId: string;

/** The typed client, talking to an app in process (`app.request` takes the same arguments as fetch). */
const clientOf = (
  app: { request: (input: string, init?: RequestInit) => Response | Promise<Response> },
  apiKey: string | null = h.adminKey,
) =>
  createClient({
    baseUrl: 'http://service.test',
    apiKey: apiKey ?? undefined,
    fetch: ((input: string, init?: RequestInit) => app.request(input, init)) as typeof fetch,
  });

async function collect(stream: AsyncIterable<PlanEvent>): Promise<{ events: PlanEvent[]; firstAfterMs: number }> {
  const started = performance.now();
  let firstAfterMs = -1;
  const events: PlanEvent[] = [];
  for await (const e of stream) {
    if (firstAfterMs < 0) firstAfterMs = performance.now() - started;
    events.push(e);
  }
  return { events, firstAfterMs };
}

/** Another API node (no worker) on the harness's database and task queue. */
function apiNode(name: string, overrides: Partial<ServiceOverrides> = {}): Promise<Service> {
  const base = loadConfig({});
  return createService(
    {
      ...base,
      databaseUrl: h.databaseUrl,
      adminApiKey: `wfa_unused_${name}_${run}`,
      authSigningKey: `${name} ${run}`,
      temporal: { ...base.temporal, address: inject('temporalAddress'), taskQueue: h.taskQueue, uiPort: 0 },
    },
    { role: 'api', listen: false, logger: createLogger('silent'), ...overrides },
  );
}

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 50, window: 1, batchesPerRun: 500 } });
  const r = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('events-def') });
  versionId = r.body.id;
  // A second API node on the same database: no worker, its own pools.
  node2 = await apiNode('node2');
  // A third whose streams read their plan once a minute unless its status changes.
  node3 = await apiNode('node3', { planEventPollMs: { min: 60_000, max: 60_000 } });
}, 120_000);

afterAll(async () => {
  await node3?.stop();
  await node2?.stop();
  await h?.close();
});

describe('GET /alterations/{planId}/events', () => {
  it('sends progress at once, counts that only grow, then done with the finished plan, and ends', async () => {
    await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 600,
      variables: { amount: 0 },
      namePrefix: 'sse-',
    });
    const client = clientOf(h.app);
    const { planId } = await client.plans.submit({
      id: `sse-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
      filter: { definitionIds: ['events-def'] },
    });
    const { events, firstAfterMs } = await collect(client.plans.events(planId));

    expect(firstAfterMs).toBeLessThan(2_000);
    expect(events[0]!.event).toBe('progress');
    const last = events[events.length - 1]!;
    expect(last.event).toBe('done');
    expect(events.filter((e) => e.event === 'done')).toHaveLength(1);
    if (last.event !== 'done') throw new Error('unreachable');
    expect(last.data.id).toBe(planId);
    expect(last.data.status).toBe(4);
    expect(last.data.jobCounts).toMatchObject({ total: 600, completed: 600, failed: 0 });

    const progress = events.flatMap((e) => (e.event === 'progress' ? [e.data] : []));
    const doneCounts = progress.map((p) => p.jobCounts.completed + p.jobCounts.failed);
    expect(doneCounts).toEqual([...doneCounts].sort((a, b) => a - b));
    for (const p of progress) {
      expect(p).toEqual({
        status: expect.any(Number),
        jobCounts: expect.any(Object),
        instancesPerSecond: expect.any(Number),
        pauseReason: null,
        resumesAt: null,
        approval: null,
        // A plan without verify, that needed no approval.
        verification: null,
        drift: null,
      });
    }
  });

  it('gives a client that reconnects, on this node or another, the current state at once', async () => {
    const planId = `sse-${run}`;
    for (const app of [h.app, node2.app!]) {
      const { events, firstAfterMs } = await collect(clientOf(app).plans.events(planId));
      expect(firstAfterMs).toBeLessThan(2_000);
      expect(events.map((e) => e.event)).toEqual(['done']);
    }
  });

  it('serves a running plan from another API node', async () => {
    await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 400,
      variables: { amount: 1 },
      namePrefix: 'sse2-',
    });
    const { planId } = await clientOf(h.app).plans.submit({
      id: `sse-other-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 8 }],
      filter: { definitionIds: ['events-def'], searchTerm: 'sse2-' },
    });
    const { events } = await collect(clientOf(node2.app!).plans.events(planId));
    const last = events[events.length - 1]!;
    expect(last.event).toBe('done');
    if (last.event === 'done') expect(last.data.jobCounts.completed).toBe(400);
  });

  /**
   * Runs a plan over `count` new instances and watches it on node3, which polls once a minute: only the
   * plan's status change, heard through Postgres, brings its `done` within 20 s.
   */
  async function doneOnNode3(prefix: string, count: number) {
    await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count,
      variables: { amount: 2 },
      namePrefix: prefix,
    });
    const { planId } = await clientOf(h.app).plans.submit({
      id: `${prefix}${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 9 }],
      filter: { definitionIds: ['events-def'], searchTerm: prefix },
    });
    const outcome = await Promise.race([
      collect(clientOf(node3.app!).plans.events(planId)),
      new Promise<'no done within 20 s'>((resolve) => setTimeout(() => resolve('no done within 20 s'), 20_000)),
    ]);
    if (typeof outcome === 'string') throw new Error(outcome);
    return outcome.events[outcome.events.length - 1]!;
  }

  it('sends done as the plan ends, made by a worker elsewhere, without waiting for the next poll', async () => {
    const last = await doneOnNode3('sse3-', 300);
    expect(last.event).toBe('done');
    if (last.event === 'done') expect(last.data.jobCounts.completed).toBe(300);
  }, 30_000);

  it('hears status changes again after its listening connection was cut', async () => {
    const listeners =
      "FROM pg_stat_activity WHERE application_name = 'wfa-plan-status' AND datname = current_database()";
    const { rows } = await h.pool.query(`SELECT pg_terminate_backend(pid) ${listeners}`);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    // Back within its reconnect delay (1 s).
    await eventually(async () => {
      const { rows: back } = await h.pool.query(`SELECT 1 ${listeners} AND query ILIKE 'LISTEN%'`);
      return back.length >= rows.length ? true : undefined;
    }, 'the listeners to reconnect');
    expect((await doneOnNode3('sse4-', 200)).event).toBe('done');
  }, 40_000);

  it('answers as the plan read does: 401 without credentials, 403 without alterations:view, 404 for another tenant', async () => {
    const planId = `sse-${run}`;
    const statusOf = async (apiKey: string | null, id = planId) => {
      try {
        for await (const e of clientOf(h.app, apiKey).plans.events(id)) void e;
        return 200;
      } catch (err) {
        if (err instanceof ProblemError) return err.status;
        throw err;
      }
    };
    expect(await statusOf(null)).toBe(401);
    expect(await statusOf(await h.keyWith(['workflows/instances:view']))).toBe(403);
    expect(await statusOf(await h.keyWith(['alterations:view']))).toBe(200);
    expect(await statusOf(await h.keyWith(['*'], 'other-tenant'))).toBe(404);
    expect(await statusOf(h.adminKey, 'no-such-plan')).toBe(404);
  });
});
