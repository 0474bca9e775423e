import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { freePort } from '../support/free-port.js';
import { exitWithin, type Spawned, spawnKept } from '../support/processes.js';

/**
 * A worker-only process (`--worker`, the production shape) has no API port: METRICS_PORT serves its
 * `/metrics` (same permission rule as the API's) and its health probes, so Prometheus scrapes it and a
 * container health check asks it. Started as a user would (`node --import tsx src/main.ts --worker`) on the
 * test Postgres and Temporal; a port already taken stops the start naming METRICS_PORT.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = randomBytes(4).toString('hex');
const adminKey = `wfa_worker_metrics_${randomBytes(16).toString('hex')}`;
const folders: string[] = [];
const started: Spawned[] = [];

afterAll(async () => {
  for (const p of started) {
    if (p.done()) continue;
    p.child.kill('SIGTERM');
    if ((await exitWithin(p, 30_000)) === 'hung') p.child.kill('SIGKILL');
  }
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
});

async function startWorker(metricsPort: number): Promise<Spawned> {
  const database = `wfa_worker_metrics_${run}`;
  const adminUrl = inject('pgAdminUrl');
  await ensureDatabase(adminUrl, database);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${database}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'wfa-worker-metrics-'));
  folders.push(dataDir);
  const proc = spawnKept(process.execPath, ['--import', 'tsx', 'src/main.ts', '--worker'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: dbUrl.toString(),
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `worker-metrics-${run}`,
      DATA_DIR: path.join(dataDir, 'data'),
      ADMIN_API_KEY: adminKey,
      AUTH_SIGNING_KEY: `worker metrics signing key ${run}`,
      METRICS_PORT: String(metricsPort),
      // info: the level a probe must stay below.
      LOG_LEVEL: 'info',
    },
  });
  started.push(proc);
  return proc;
}

const get = async (url: string, key?: string) => {
  const res = await fetch(url, key ? { headers: { authorization: `ApiKey ${key}` } } : {});
  return { status: res.status, text: await res.text() };
};

describe('a worker-only process with METRICS_PORT', () => {
  it('serves /metrics behind its permission and /health/live and /health/ready, and logs no probe at info', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const t0 = performance.now();
    const worker = await startWorker(port);
    // Ready once the worker polls (it bundles its workflows from source first).
    const deadline = Date.now() + 90_000;
    let ready = { status: 0, text: '' };
    while (ready.status !== 200) {
      if (Date.now() > deadline || worker.done())
        throw new Error(`the worker was not ready on METRICS_PORT\n${worker.tail()}`);
      await new Promise((r) => setTimeout(r, 250));
      ready = await get(`${base}/health/ready`).catch(() => ({ status: 0, text: '' }));
    }
    const readyAfterMs = Math.round(performance.now() - t0);
    expect(JSON.parse(ready.text)).toEqual({ status: 'ok', checks: { postgres: 'ok', temporal: 'ok', worker: 'ok' } });
    expect(await get(`${base}/health/live`)).toEqual({ status: 200, text: '{"status":"ok"}' });
    expect(worker.out()).toContain(`Metrics:      http://localhost:${port}/metrics`);

    expect((await get(`${base}/metrics`)).status).toBe(401);
    const metrics = await get(`${base}/metrics`, adminKey);
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^wfa_db_pool_connections\{pool="worker",state="total"\} \d+$/m);
    expect(metrics.text).toMatch(/^wfa_db_pool_connections\{pool="calls",state="total"\} \d+$/m);
    expect(metrics.text).toMatch(/^wfa_db_pool_connections\{pool="probes",state="total"\} 1$/m);
    expect(metrics.text).not.toContain('pool="api"');
    expect(metrics.text).toMatch(/^wfa_plan_batches_in_flight 0$/m);
    // The engine's queues, read through the probes connection: nothing waits in a database with no instance.
    expect(metrics.text).toMatch(/^wfa_engine_backlog_rows\{queue="outbox"\} 0$/m);
    expect(metrics.text).toMatch(/^wfa_engine_backlog_rows\{queue="resumptions"\} 0$/m);
    expect(metrics.text).toMatch(/^wfa_engine_backlog_oldest_seconds\{queue="outbox"\} 0$/m);
    expect(metrics.text).toMatch(/^wfa_http_requests_total\{route="\/health\/ready",method="GET",status="200"\} \d+$/m);
    // The SDK's worker metrics: its three workers poll.
    expect(metrics.text).toMatch(/^temporal_num_pollers\{.*\} [1-9]/m);
    expect(metrics.text).toMatch(/^temporal_worker_task_slots_available\{/m);
    // Nothing else: a worker takes no API requests.
    expect((await get(`${base}/alterations`, adminKey)).status).toBe(404);

    worker.child.kill('SIGTERM');
    expect(await exitWithin(worker, 30_000)).toEqual({ code: 0, signal: null });
    const lines = worker
      .out()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string; level?: number; path?: string; status?: number });
    // A start that went as it should warns of nothing (the SDK's "no workflows registered" of the batches and
    // calls workers, which run activities only, is at debug).
    expect(lines.filter((l) => (l.level ?? 0) >= 40 && l.msg !== 'request').map((l) => l.msg)).toEqual([]);
    const requests = lines.filter((l) => l.msg === 'request');
    // Only the failing ones (401, 404) are logged at this level, at warn; the probes and the scrape not at all.
    expect(requests.map((l) => [l.path, l.status, l.level])).toEqual([
      ['/metrics', 401, 40],
      ['/alterations', 404, 40],
    ]);
    console.log(`worker-only process ready on METRICS_PORT after ${readyAfterMs} ms`);
  });

  it('stops its start, naming METRICS_PORT, when the port is taken', async () => {
    const taken = net.createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => taken.listen(port, resolve));
    try {
      const worker = await startWorker(port);
      expect(await exitWithin(worker, 30_000)).toEqual({ code: 1, signal: null });
      expect(worker.err()).toContain(`Port ${port} (METRICS_PORT) is already in use`);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
