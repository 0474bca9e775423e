/**
 * The service as `npm start` runs it (API and worker), in a process of its own on the bench's Postgres and dev
 * server, and the tenants' way to call its API.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { freePort } from '../../test/support/free-port.js';
import { sleep } from '../util.js';
import { ROOT } from './settings.js';

/** One tenant's client call: its key, the method and path, a JSON body; the JSON answer, or an error past 299. */
export function caller(base: string) {
  return async <T = any>(key: string, method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status} ${text.slice(0, 300)}`);
    return (text ? JSON.parse(text) : undefined) as T;
  };
}
export type Call = ReturnType<typeof caller>;

/** Started and healthy; stopped by the stop it puts first in `stops`. */
export async function startService(o: {
  work: string;
  databaseUrl: string;
  temporalAddress: string;
  stops: (() => Promise<unknown>)[];
}) {
  const port = await freePort();
  const adminKey = `wfa_noisy_${randomBytes(16).toString('hex')}`;
  const service = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      DATA_DIR: path.join(o.work, 'data'),
      DATABASE_URL: o.databaseUrl,
      TEMPORAL_ADDRESS: o.temporalAddress,
      TEMPORAL_TASK_QUEUE: `noisy-${process.pid}`,
      ADMIN_API_KEY: adminKey,
      AUTH_SIGNING_KEY: randomBytes(32).toString('base64url'),
      OUTBOUND_HTTP_ALLOW_NETWORKS: '127.0.0.0/8',
      LOG_LEVEL: 'warn',
      MALLOC_ARENA_MAX: '2',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => service.once('exit', () => resolve()));
  o.stops.unshift(async () => {
    service.kill('SIGTERM');
    await exited;
  });
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 120_000; ;) {
    const ok = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || service.exitCode !== null) throw new Error('the service did not become healthy');
    await sleep(250);
  }
  return { service, base, adminKey };
}
