import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { freePort } from './free-port.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface SpawnedService {
  url: string;
  /** Its own database on the test Postgres. */
  databaseUrl: string;
  adminKey: string;
  child: ChildProcess;
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
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
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
    stdio: 'ignore',
  });
  const deadline = Date.now() + 120_000;
  const health = () =>
    fetch(`${url}/health`).then(
      (r) => r.status,
      () => 0,
    );
  while ((await health()) !== 200) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the ${name} service did not become healthy`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    url,
    databaseUrl: dbUrl.toString(),
    adminKey,
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
