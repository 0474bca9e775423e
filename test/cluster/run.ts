/**
 * `npm run test:cluster`: the production shape run for real, without Docker. As separate OS processes,
 * from the build (`npm run build`): a Postgres server, a Temporal dev server on a SQLite file, two API
 * nodes sharing one AUTH_SIGNING_KEY and two workers. One plan over 50,000 seeded instances runs while,
 * in turn, a worker is killed (kill -9) and replaced, the Temporal server is killed (kill -9) and started
 * again on its file, and Postgres is restarted in immediate mode. Then: the plan Completed, every instance
 * was written exactly once and every job completed once (triggers count them), both workers ran batches
 * (the plan's Temporal history), and tokens and keys behave the same across the two API nodes.
 * Everything is stopped by pid at the end, also on failure or Ctrl-C. The last line is
 * `cluster: N passed, N failed`.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { NODE_MEMORY_FLAGS } from '../../src/memory.js';
import { ensureCliBinary } from '../../src/temporal/cli-binary.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';
import { freePort } from '../support/free-port.js';
import { kill9, pidsAlive, PostgresServer, type Proc, start, stopAll, TemporalServer, waitFor } from './processes.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const INSTANCES = Number(process.env.CLUSTER_INSTANCES ?? 50_000);
const PLAN_VALUE = 777;
const FAULTS_AT = [0.2, 0.45, 0.7];

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}
const checks: Check[] = [];
const check = (name: string, ok: boolean, detail: string) => {
  checks.push({ name, ok, detail });
  log(`${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}`);
};
const started = Date.now();
const log = (msg: string) =>
  process.stdout.write(`[cluster ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);

async function main(): Promise<void> {
  const config = loadConfig();
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-cluster-'));
  // As root, Postgres runs as the postgres user, who must be able to reach its data folder inside.
  await chmod(work, 0o711);
  const pids: number[] = [];
  const track = (p: Proc) => (pids.push(p.child.pid!), p);
  process.on('SIGINT', () => void stopAll().then(() => process.exit(130)));
  try {
    log('npm run build');
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    const cli = config.temporal.cliPath ?? (await ensureCliBinary({ cacheDir: config.cacheDir }));

    const pgServer = await PostgresServer.create(path.join(work, 'pgdata'), await freePort());
    await pgServer.start();
    track(pgServer.proc!);
    const admin = new pg.Client({ connectionString: pgServer.url });
    await admin.connect();
    await admin.query('CREATE DATABASE workflow_alterations');
    await admin.end();
    const databaseUrl = `postgres://postgres@127.0.0.1:${pgServer.port}/workflow_alterations`;
    log(`Postgres pid ${pgServer.proc!.child.pid} on ${pgServer.port}`);

    const temporal = new TemporalServer(cli, path.join(work, 'temporal.sqlite'), await freePort());
    await temporal.start();
    track(temporal.proc!);
    log(`Temporal dev server pid ${temporal.proc!.child.pid} on ${temporal.port}`);

    const adminKey = `wfa_cluster_${randomBytes(16).toString('hex')}`;
    const password = `cluster-${randomBytes(8).toString('hex')}`;
    const nodeEnv = (name: string, extra: Record<string, string>): NodeJS.ProcessEnv => {
      const env: NodeJS.ProcessEnv = { ...process.env };
      for (const k of ['TEMPORAL_CLI_PATH', 'PORT']) delete env[k];
      return {
        ...env,
        DATABASE_URL: databaseUrl,
        TEMPORAL_ADDRESS: temporal.address,
        DATA_DIR: path.join(work, name),
        AUTH_SIGNING_KEY: 'one signing key shared by every API node of this cluster',
        ADMIN_API_KEY: adminKey,
        ADMIN_PASSWORD: password,
        ALTERATION_BATCH_SIZE: '100',
        ALTERATION_BATCH_WINDOW: '2',
        LOG_LEVEL: 'warn',
        ...extra,
      };
    };
    const node = (name: string, role: '--api' | '--worker', extra: Record<string, string> = {}) =>
      track(
        start(name, process.execPath, [...NODE_MEMORY_FLAGS, 'dist/src/main.js', role], {
          cwd: ROOT,
          env: nodeEnv(name, extra),
        }),
      );

    const apiPorts = [await freePort(), await freePort()];
    const apis = [
      node('api-1', '--api', { PORT: String(apiPorts[0]) }),
      node('api-2', '--api', { PORT: String(apiPorts[1]) }),
    ];
    const urls = apiPorts.map((p) => `http://127.0.0.1:${p}`);
    const workers = [node('worker-1', '--worker'), node('worker-2', '--worker')];
    for (const [i, url] of urls.entries()) {
      await waitFor(
        `api-${i + 1} /health`,
        async () => ((await fetch(`${url}/health`)).status === 200 ? true : undefined),
        90_000,
        apis[i],
      );
    }
    log(
      `API nodes pids ${apis.map((a) => a.child.pid).join(', ')}; workers pids ${workers.map((w) => w.child.pid).join(', ')}`,
    );

    const call = async (i: number, method: string, p: string, body?: unknown, auth = `ApiKey ${adminKey}`) => {
      const res = await fetch(urls[i]! + p, {
        method,
        headers: { authorization: auth, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };

    // Seed: a definition through the API, N suspended instances by SQL, then triggers that count writes.
    const def = await call(0, 'POST', '/workflow-definitions', approvalWithNote('cluster-orders'));
    if (def.status !== 201) throw new Error(`publish: ${def.status} ${JSON.stringify(def.body)}`);
    const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    db.on('error', () => undefined); // Postgres is restarted below: idle clients may die.
    await seedInstances(db as unknown as pg.Pool, {
      definitionVersionId: def.body.id,
      count: INSTANCES,
      variables: { amount: 0 },
    });
    await db.query(`
      CREATE TABLE cluster_instance_writes (instance_id text PRIMARY KEY, n int NOT NULL);
      CREATE TABLE cluster_job_completions (plan_id text, ord int, n int NOT NULL, PRIMARY KEY (plan_id, ord));
      CREATE FUNCTION cluster_count_instance_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        INSERT INTO cluster_instance_writes VALUES (NEW.id, 1) ON CONFLICT (instance_id) DO UPDATE SET n = cluster_instance_writes.n + 1;
        RETURN NEW; END $$;
      CREATE FUNCTION cluster_count_job_completion() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.status = 2 THEN
          IF TG_OP = 'UPDATE' THEN
            IF OLD.status = 2 THEN RETURN NEW; END IF;
          END IF;
          INSERT INTO cluster_job_completions VALUES (NEW.plan_id, NEW.ord, 1) ON CONFLICT (plan_id, ord) DO UPDATE SET n = cluster_job_completions.n + 1;
        END IF;
        RETURN NEW; END $$;
      CREATE TRIGGER cluster_instance_writes AFTER UPDATE ON workflow_instances FOR EACH ROW EXECUTE FUNCTION cluster_count_instance_write();
      CREATE TRIGGER cluster_job_completions AFTER INSERT OR UPDATE ON alteration_jobs FOR EACH ROW EXECUTE FUNCTION cluster_count_job_completion();`);
    await db.query('VACUUM ANALYZE workflow_instances');
    log(`seeded ${INSTANCES} instances; write-counting triggers installed`);

    // The plan, submitted to node 1; progress read from Postgres (and through node 2 at the end).
    const planId = `cluster-${randomBytes(4).toString('hex')}`;
    const submitted = await call(0, 'POST', '/alterations/submit', {
      id: planId,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: PLAN_VALUE }],
      filter: { definitionIds: ['cluster-orders'] },
    });
    if (submitted.status !== 202) throw new Error(`submit: ${submitted.status} ${JSON.stringify(submitted.body)}`);
    const planStarted = Date.now();
    const jobsDone = async () => {
      const { rows } = await db.query<{ done: number }>(
        'SELECT coalesce(sum(completed + failed), 0)::int AS done FROM alteration_batch_counts WHERE plan_id = $1',
        [planId],
      );
      return rows[0]!.done;
    };
    log(`plan ${planId} submitted to api-1`);

    const faults: { what: string; atJobs: number; atSeconds: number; stallSeconds: number }[] = [];
    const actions: [string, () => Promise<void>][] = [
      [
        'kill -9 worker-1, start worker-3',
        async () => {
          await kill9(workers[0]!);
          workers.push(node('worker-3', '--worker'));
        },
      ],
      [
        'kill -9 the Temporal server, start it again on its SQLite file',
        async () => {
          await kill9(temporal.proc!);
          await temporal.start();
          track(temporal.proc!);
        },
      ],
      [
        'restart Postgres in immediate mode (SIGQUIT, start)',
        async () => {
          await pgServer.restartImmediate();
          track(pgServer.proc!);
        },
      ],
    ];
    for (const [i, [what, act]] of actions.entries()) {
      const threshold = Math.floor(FAULTS_AT[i]! * INSTANCES);
      const atJobs = await waitFor(
        `${threshold} jobs done`,
        async () => {
          const done = await jobsDone();
          return done >= threshold ? done : undefined;
        },
        15 * 60_000,
      );
      const t0 = Date.now();
      log(`fault ${i + 1}: ${what} (jobs done: ${atJobs})`);
      await act();
      const resumedAt = await waitFor(
        'the plan to move again',
        async () => ((await jobsDone()) > atJobs ? Date.now() : undefined),
        10 * 60_000,
      );
      const fault = { what, atJobs, atSeconds: (t0 - planStarted) / 1000, stallSeconds: (resumedAt - t0) / 1000 };
      faults.push(fault);
      log(`  moving again after ${fault.stallSeconds.toFixed(1)} s`);
    }

    const final = await waitFor(
      'the plan to finish',
      async () => {
        const r = await call(1, 'GET', `/alterations/${planId}`);
        return r.status === 200 && r.body.plan.status >= 4 ? r.body.plan : undefined;
      },
      15 * 60_000,
    );
    const planSeconds = (Date.now() - planStarted) / 1000;
    log(`plan ended with status ${final.status} after ${planSeconds.toFixed(1)} s: ${JSON.stringify(final.jobCounts)}`);

    // Exactly once, counted by the triggers and read back.
    const one = async (sql: string, params: unknown[] = []) =>
      (await db.query(sql, params)).rows[0] as Record<string, number>;
    check('plan Completed (read through api-2)', final.status === 4, `status ${final.status}`);
    check(
      'jobCounts',
      final.jobCounts.completed === INSTANCES && final.jobCounts.failed === 0,
      JSON.stringify(final.jobCounts),
    );
    const writes = await one(
      'SELECT count(*)::int AS instances, coalesce(max(n), 0)::int AS max, coalesce(min(n), 0)::int AS min FROM cluster_instance_writes',
    );
    check(
      'every instance written exactly once',
      writes.instances === INSTANCES && writes.max === 1 && writes.min === 1,
      `${writes.instances} instances written, ${writes.min}–${writes.max} writes each`,
    );
    const valued = await one(
      `SELECT count(*)::int AS n FROM workflow_instances WHERE variables->'amount' = $1::jsonb`,
      [JSON.stringify(PLAN_VALUE)],
    );
    check('every instance holds the new value', valued.n === INSTANCES, `${valued.n} of ${INSTANCES}`);
    const completions = await one(
      'SELECT count(*)::int AS jobs, coalesce(max(n), 0)::int AS max FROM cluster_job_completions WHERE plan_id = $1',
      [planId],
    );
    const completedJobs = await one(
      'SELECT count(*)::int AS n FROM alteration_jobs WHERE plan_id = $1 AND status = 2',
      [planId],
    );
    check(
      'every job Completed once',
      completions.jobs === INSTANCES && completions.max === 1 && completedJobs.n === INSTANCES,
      `${completions.jobs} jobs completed, at most ${completions.max} time(s) each; ${completedJobs.n} Completed`,
    );

    // Both workers ran batches: the plan's Temporal history names the worker of each started activity.
    const connection = await Connection.connect({ address: temporal.address });
    const handle = new Client({ connection }).workflow.getHandle(`alteration-plan-${planId}`);
    const history = await handle.fetchHistory();
    const result = (await handle.result()) as { status: string; completed: number; failed: number };
    await connection.close();
    check(
      'the plan workflow returns the exact counts',
      result.status === 'Completed' && result.completed === INSTANCES && result.failed === 0,
      JSON.stringify(result),
    );
    const scheduled = new Map<string, string>();
    const byWorker = new Map<string, number>();
    for (const e of history.events ?? []) {
      if (e.activityTaskScheduledEventAttributes)
        scheduled.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '');
      const startedAttrs = e.activityTaskStartedEventAttributes;
      if (startedAttrs && scheduled.get(String(startedAttrs.scheduledEventId)) === 'runJobBatch') {
        byWorker.set(startedAttrs.identity ?? '?', (byWorker.get(startedAttrs.identity ?? '?') ?? 0) + 1);
      }
    }
    const workerPids = new Map(workers.map((w) => [String(w.child.pid), w.name]));
    const named = [...byWorker].map(([identity, n]) => `${workerPids.get(identity.split('@')[0]!) ?? identity}: ${n}`);
    check(
      'both workers ran batches',
      byWorker.size >= 2 && [...byWorker.keys()].every((id) => workerPids.has(id.split('@')[0]!)),
      named.join(', '),
    );

    // Across the API nodes: one signing key, sessions and keys in Postgres.
    const login = await call(0, 'POST', '/identity/login', { username: 'admin', password });
    const onNode2 = await call(1, 'GET', '/alterations?limit=1', undefined, `Bearer ${login.body?.accessToken}`);
    check(
      'a token from api-1 works on api-2',
      login.status === 200 && onNode2.status === 200,
      `login ${login.status}, api-2 ${onNode2.status}`,
    );
    const logout = await call(
      0,
      'POST',
      '/identity/logout',
      { refreshToken: login.body.refreshToken },
      `Bearer ${login.body.accessToken}`,
    );
    const refreshed = await call(1, 'POST', '/identity/refresh', { refreshToken: login.body.refreshToken }, '');
    check(
      'after logout on api-1 the refresh token is refused on api-2',
      logout.status === 204 && refreshed.status === 401,
      `logout ${logout.status}, refresh ${refreshed.status}`,
    );
    const key = await call(0, 'POST', '/identity/api-keys', { name: 'cluster', permissions: ['alterations:view'] });
    const before = await call(0, 'GET', '/alterations?limit=1', undefined, `ApiKey ${key.body?.key}`);
    const revoked = await call(1, 'DELETE', `/identity/api-keys/${key.body?.id}`);
    const after = await call(0, 'GET', '/alterations?limit=1', undefined, `ApiKey ${key.body?.key}`);
    check(
      'a key revoked on api-2 is refused on api-1',
      before.status === 200 && revoked.status === 204 && after.status === 401,
      `before ${before.status}, revoke ${revoked.status}, after ${after.status}`,
    );
    await db.end();

    log('faults:');
    for (const f of faults)
      log(
        `  ${f.what}: at ${f.atSeconds.toFixed(1)} s, ${f.atJobs} jobs done; the plan moved again after ${f.stallSeconds.toFixed(1)} s`,
      );
    log(
      `plan: ${INSTANCES} instances in ${planSeconds.toFixed(1)} s with the faults above; batches by worker: ${named.join(', ')}`,
    );
  } catch (err) {
    check('the scenario ran to its end', false, err instanceof Error ? err.message : String(err));
  } finally {
    await stopAll();
    const left = pidsAlive(pids);
    check(
      'nothing left running',
      left.length === 0,
      left.length ? `still alive: ${left.join(', ')}` : `${pids.length} processes stopped`,
    );
    await rm(work, { recursive: true, force: true });
  }
  const failed = checks.filter((c) => !c.ok).length;
  process.stdout.write(`\ncluster: ${checks.length - failed} passed, ${failed} failed\n`);
  process.exitCode = failed ? 1 : 0;
}

if (!existsSync(path.join(ROOT, 'package.json'))) throw new Error('run from the repository');
await main();
