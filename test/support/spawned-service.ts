import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { WORKFLOW_VM_PRELOAD } from '../../src/memory.js';
import { freePort } from './free-port.js';
import { exitWithin, type Spawned, spawnKept } from './processes.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface SpawnedService {
  url: string;
  /** Its own database on the test Postgres. */
  databaseUrl: string;
  adminKey: string;
  child: ChildProcess;
  /** Its output (kept for a failure's message) and exit. */
  proc: Spawned;
  stop(): Promise<void>;
}

/**
 * The service as a user starts it, `node --import tsx src/main.ts`, in a process of its own: on its own
 * database of the test Postgres, on the test Temporal unless `env` sets otherwise (TEMPORAL_ADDRESS empty:
 * its own dev server), on a free port, healthy before this returns.
 */
export async function spawnService(
  name: string,
  dataDir: string,
  env: NodeJS.ProcessEnv = {},
): Promise<SpawnedService> {
  const run = randomBytes(4).toString('hex');
  const database = `wfa_${name}_${run}`;
  const adminUrl = inject('pgAdminUrl');
  await ensureDatabase(adminUrl, database);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${database}`;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const adminKey = `wfa_${name}_${randomBytes(16).toString('hex')}`;
  const proc = spawnKept(process.execPath, ['--import', 'tsx', '--import', WORKFLOW_VM_PRELOAD.src, 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: dbUrl.toString(),
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `${name}-${run}`,
      DATA_DIR: path.join(dataDir, 'data'),
      PORT: String(port),
      ADMIN_API_KEY: adminKey,
      AUTH_SIGNING_KEY: `${name} signing key ${run}`,
      LOG_LEVEL: 'warn',
      ...env,
    },
  });
  const { child } = proc;
  const deadline = Date.now() + 120_000;
  const health = () =>
    fetch(`${url}/health`).then(
      (r) => r.status,
      () => 0,
    );
  while ((await health()) !== 200) {
    if (Date.now() > deadline || proc.done()) {
      if (!proc.done()) child.kill('SIGKILL');
      throw new Error(
        `the ${name} service did not become healthy within 120 s (${proc.done() ? 'it exited' : 'killed'})\n${proc.tail()}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    url,
    databaseUrl: dbUrl.toString(),
    adminKey,
    child,
    proc,
    async stop() {
      if (proc.done()) return;
      child.kill('SIGTERM');
      if ((await exitWithin(proc, 60_000)) !== 'hung') return;
      child.kill('SIGKILL');
      await proc.exited;
      throw new Error(`the ${name} service did not stop within 60 s of SIGTERM\n${proc.tail()}`);
    },
  };
}
