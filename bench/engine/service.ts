/**
 * The service as `npm start` starts it, in a process of its own (a fresh DATA_DIR, its embedded Postgres, the
 * bench's dev server), and the bench's one way to speak to it: HTTP with the admin key.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { postgresDataDirOf } from '../../src/embedded/leftovers.js';
import { passwordFileOf } from '../../src/embedded/postgres.js';
import { NODE_MEMORY_FLAGS, WORKFLOW_VM_PRELOAD } from '../../src/memory.js';
import { freePort } from '../../test/support/free-port.js';
import type { BenchDevServer } from '../engine-devserver.js';
import { round, sleep } from '../util.js';
import { benchProcesses, Refused } from './measure.js';
import { log, NAMESPACE, ROOT } from './settings.js';

export async function startService(work: string, dev: BenchDevServer, stops: (() => Promise<unknown>)[]) {
  const port = await freePort();
  const pgPort = await freePort();
  const dataDir = path.join(work, 'data');
  const adminKey = `wfa_engine_${randomBytes(16).toString('hex')}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
    PORT: String(port),
    DATA_DIR: dataDir,
    EMBEDDED_POSTGRES_PORT: String(pgPort),
    TEMPORAL_ADDRESS: dev.address,
    TEMPORAL_NAMESPACE: NAMESPACE,
    ADMIN_API_KEY: adminKey,
    // Phase d calls a local endpoint: loopback is refused by default.
    OUTBOUND_HTTP_ALLOW_NETWORKS: '127.0.0.0/8',
  };
  // The service's own Postgres and its defaults: nothing of the caller's environment chooses them.
  for (const k of ['DATABASE_URL', 'TEMPORAL_TASK_QUEUE', 'AUTH_SIGNING_KEY', 'LOG_LEVEL']) delete env[k];
  // What `npm start` runs (package.json): MALLOC_ARENA_MAX=2 exec node --import tsx --import <WORKFLOW_VM_PRELOAD>
  // <NODE_MEMORY_FLAGS> src/main.ts; BENCH_ENGINE_NODE_ARGS replaces the flags after tsx (to weigh another setting).
  const flags = process.env.BENCH_ENGINE_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [
    '--import',
    WORKFLOW_VM_PRELOAD.src,
    ...NODE_MEMORY_FLAGS,
  ];
  const args = ['--import', 'tsx', ...flags, 'src/main.ts'];
  const logFile = path.join(work, 'service.log');
  const out = createWriteStream(logFile);
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  benchProcesses.service = child;
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  stops.unshift(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      if (!(await Promise.race([exited.then(() => true), sleep(60_000).then(() => false)]))) {
        log('the service did not stop within 60 s: SIGKILL');
        child.kill('SIGKILL');
        await exited;
      }
    }
    out.end();
  });
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 300_000; ;) {
    const ok = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-20).join('\n');
      throw new Error(`the service did not become healthy:\n${tail}`);
    }
    await sleep(200);
  }
  const startupMs = round(performance.now() - t0);
  const password = (await readFile(passwordFileOf(postgresDataDirOf(dataDir)), 'utf8')).trim();
  return {
    base,
    adminKey,
    pid: child.pid!,
    startupMs,
    command: `MALLOC_ARENA_MAX=${env.MALLOC_ARENA_MAX} node ${args.join(' ')}`,
    pgBase: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}`,
    logFile,
  };
}

export function api(base: string, key: string) {
  return async <T = any>(method: string, p: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }).catch((err: unknown) => {
      throw new Refused(`${method} ${p}: ${String(err)}`);
    });
    const text = await res.text();
    if (res.status === 429 || res.status === 503) throw new Refused(`${method} ${p}: HTTP ${res.status}`);
    if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status} ${text.slice(0, 500)}`);
    return (text ? JSON.parse(text) : undefined) as T;
  };
}
