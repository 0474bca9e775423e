/**
 * The engine bench's baseline worker (bench/engine.ts starts it as a process of its own, as the service's
 * worker is one): bundles bench/engine-baseline-workflow.ts and runs it on its own task queue, with the two
 * local activities on a Postgres pool of its own. Prints `ready` on stdout once it polls; SIGTERM stops it.
 *
 * Environment: ENGINE_BASELINE_DATABASE_URL, ENGINE_BASELINE_TEMPORAL_ADDRESS, ENGINE_BASELINE_TASK_QUEUE,
 * ENGINE_BASELINE_NAMESPACE (default), ENGINE_BASELINE_POOL (20: the service's DATABASE_POOL_WORKER).
 */
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import pg from 'pg';

/** The baseline's table: one row per instance, written by WriteLine, updated by SetVariable. */
const BASELINE_TABLE_SQL = `CREATE TABLE IF NOT EXISTS baseline_instances (
  id          text PRIMARY KEY,
  line        text NOT NULL,
  value       integer,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz
)`;

export interface BaselineActivities {
  writeLine(instanceId: string): Promise<void>;
  setVariable(instanceId: string): Promise<void>;
  /** POSTs to `url` with the instance as its Idempotency-Key; a non-2xx answer fails the attempt. */
  callOut(url: string, instanceId: string): Promise<void>;
}

function createActivities(pool: pg.Pool): BaselineActivities {
  return {
    async writeLine(instanceId) {
      await pool.query(`INSERT INTO baseline_instances (id, line) VALUES ($1, 'started') ON CONFLICT (id) DO NOTHING`, [
        instanceId,
      ]);
    },
    async setVariable(instanceId) {
      await pool.query(`UPDATE baseline_instances SET value = 42, updated_at = now() WHERE id = $1`, [instanceId]);
    },
    async callOut(url, instanceId) {
      const res = await fetch(url, { method: 'POST', headers: { 'idempotency-key': instanceId } });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
    },
  };
}

async function main(): Promise<void> {
  const env = (name: string) => {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set`);
    return v;
  };
  const poolSize = Number(process.env.ENGINE_BASELINE_POOL ?? 20);
  Runtime.install({ shutdownSignals: [], logger: new DefaultLogger('WARN') });
  const pool = new pg.Pool({ connectionString: env('ENGINE_BASELINE_DATABASE_URL'), max: poolSize });
  await pool.query(BASELINE_TABLE_SQL);
  const connection = await NativeConnection.connect({ address: env('ENGINE_BASELINE_TEMPORAL_ADDRESS') });
  const worker = await Worker.create({
    connection,
    namespace: process.env.ENGINE_BASELINE_NAMESPACE ?? 'default',
    taskQueue: env('ENGINE_BASELINE_TASK_QUEUE'),
    workflowsPath: fileURLToPath(new URL('./engine-baseline-workflow.ts', import.meta.url)),
    activities: createActivities(pool),
    // Each local activity holds one connection of the pool at most, as in the service's worker.
    maxConcurrentLocalActivityExecutions: poolSize,
    shutdownGraceTime: '5 seconds',
  });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    worker.shutdown();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const running = worker.run();
  // The worker polls once its state is RUNNING.
  for (let i = 0; worker.getState() !== 'RUNNING' && i < 600; i++) await new Promise((r) => setTimeout(r, 50));
  process.stdout.write('ready\n');
  await running;
  await connection.close();
  await pool.end();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(
      `baseline worker failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
