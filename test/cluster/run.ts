/**
 * `npm run test:cluster`: the production shape run for real, without Docker. As separate OS processes, from
 * the build (`npm run build`): a Postgres server, the Temporal **server** (temporal-server v1.29.1 built from its
 * Go module, not the dev server) with its persistence and SQL visibility in databases of its own on that
 * Postgres, Task Queue Fairness on and the service's search attributes registered, two API nodes sharing one
 * AUTH_SIGNING_KEY and two workers.
 *
 * 1. One plan over 50,000 seeded instances (a ModifyVariable and a ScheduleActivity of a WriteLine each) runs
 *    while, in turn, a worker is killed (kill -9) and replaced, the Temporal server is killed (kill -9) and
 *    started again on its databases, and Postgres is restarted in immediate mode. The plan Completed, every
 *    instance was written exactly once, its step ran once (one journal line), every job completed once
 *    (triggers count them), and tokens and keys behave the same across the two API nodes.
 * 2. Scaling: a second plan starts with one worker, and two more join while it runs (1 to 3): it Completes,
 *    each instance written once more, and the workers that joined ran batches.
 * 3. Spread: a third plan with three workers from its start: no worker ran more than half of its batches.
 * 4. 2,000 instances started through both API nodes, each making one outbound call from its workflow, while a
 *    worker is killed (kill -9) and replaced: each finishes with every step recorded once and one workflow in
 *    Temporal, Completed as Finished/Finished.
 *
 * Everything is stopped by pid at the end, also on failure or Ctrl-C. It prints which Temporal it ran, the
 * batches by worker of each plan and the faults survived; the last line is `cluster: N passed, N failed`.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { NODE_MEMORY_FLAGS, WORKFLOW_VM_PRELOAD } from '../../src/memory.js';
import { TEMPORAL_SERVER_VERSION } from '../../src/temporal/server-binary.js';
import { freePort } from '../support/free-port.js';
import { seedInstances } from '../support/seed.js';
import { findTemporalServerTools, TemporalServer } from '../support/temporal-server.js';
import { approvalWithNote } from '../support/workflows.js';
import { kill9, pidsAlive, PostgresServer, type Proc, start, stop, stopAll, waitFor } from './processes.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const INSTANCES = Number(process.env.CLUSTER_INSTANCES ?? 50_000);
/** Instances started through the API nodes, each one outbound call, while a worker is killed (kill -9). */
const STARTED = Number(process.env.CLUSTER_STARTED ?? 2_000);
const FAULTS_AT = [0.2, 0.45, 0.7];
/** Of a plan's batches, the most one of three workers may run (issue 25: a plan spreads over workers). */
const MAX_SHARE = 0.5;

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
  const summary: string[] = [];
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-cluster-'));
  // As root, Postgres runs as the postgres user, who must be able to reach its data folder inside.
  await chmod(work, 0o711);
  const pids: number[] = [];
  const track = (p: Proc) => (pids.push(p.child.pid!), p);
  let temporal: TemporalServer | undefined;
  const trackTemporal = () => {
    if (temporal?.pid) pids.push(temporal.pid);
  };
  process.on('SIGINT', () => void Promise.all([stopAll(), temporal?.stop()]).then(() => process.exit(130)));
  try {
    log('npm run build');
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    const found = await findTemporalServerTools(config.cacheDir);
    if ('missing' in found) throw new Error(`no Temporal server to run: ${found.missing}`);

    const pgServer = await PostgresServer.create(path.join(work, 'pgdata'), await freePort());
    await pgServer.start();
    track(pgServer.proc!);
    const admin = new pg.Client({ connectionString: pgServer.url });
    await admin.connect();
    await admin.query('CREATE DATABASE workflow_alterations');
    await admin.end();
    const databaseUrl = `postgres://postgres@127.0.0.1:${pgServer.port}/workflow_alterations`;
    log(`Postgres pid ${pgServer.proc!.child.pid} on ${pgServer.port}`);

    temporal = await TemporalServer.create({
      ...found,
      dir: path.join(work, 'temporal'),
      // Trust authentication on loopback: the password is not checked.
      postgres: { host: '127.0.0.1', port: pgServer.port, user: 'postgres', password: 'cluster' },
    });
    await temporal.start();
    trackTemporal();
    const server = `temporal-server ${TEMPORAL_SERVER_VERSION} (${found.tools.server}): Postgres persistence and SQL visibility in the databases temporal and temporal_visibility, Task Queue Fairness on`;
    log(`Temporal server pid ${temporal.pid} on ${temporal.port}; ${server}`);
    summary.push(`Temporal: ${server}`);

    const adminKey = `wfa_cluster_${randomBytes(16).toString('hex')}`;
    const password = `cluster-${randomBytes(8).toString('hex')}`;
    const temporalAddress = temporal.address;
    const nodeEnv = (name: string, extra: Record<string, string>): NodeJS.ProcessEnv => {
      const env: NodeJS.ProcessEnv = { ...process.env };
      for (const k of ['TEMPORAL_CLI_PATH', 'PORT', 'METRICS_PORT']) delete env[k];
      return {
        ...env,
        DATABASE_URL: databaseUrl,
        TEMPORAL_ADDRESS: temporalAddress,
        DATA_DIR: path.join(work, name),
        AUTH_SIGNING_KEY: 'one signing key shared by every API node of this cluster',
        ADMIN_API_KEY: adminKey,
        ADMIN_PASSWORD: password,
        ALTERATION_BATCH_SIZE: '100',
        ALTERATION_BATCH_WINDOW: '2',
        LOG_LEVEL: 'warn',
        // The instances' calls go to a server of this process.
        OUTBOUND_HTTP_ALLOW_NETWORKS: '127.0.0.0/8',
        ...extra,
      };
    };
    const node = (name: string, role: '--api' | '--worker', extra: Record<string, string> = {}) =>
      track(
        start(
          name,
          process.execPath,
          ['--import', WORKFLOW_VM_PRELOAD.dist, ...NODE_MEMORY_FLAGS, 'dist/src/main.js', role],
          {
            cwd: ROOT,
            env: nodeEnv(name, extra),
          },
        ),
      );

    const apiPorts = [await freePort(), await freePort()];
    const apis = [
      node('api-1', '--api', { PORT: String(apiPorts[0]) }),
      node('api-2', '--api', { PORT: String(apiPorts[1]) }),
    ];
    const urls = apiPorts.map((p) => `http://127.0.0.1:${p}`);
    const workers = [node('worker-1', '--worker'), node('worker-2', '--worker')];
    const alive = () => workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
    const addWorker = () => {
      const w = node(`worker-${workers.length + 1}`, '--worker');
      workers.push(w);
      return w;
    };
    for (const [i, url] of urls.entries()) {
      await waitFor(
        `api-${i + 1} /health/ready`,
        async () => ((await fetch(`${url}/health/ready`)).status === 200 ? true : undefined),
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
    const one = async (sql: string, params: unknown[] = []) =>
      (await db.query(sql, params)).rows[0] as Record<string, number>;

    const temporalClient = async <T>(fn: (client: Client) => Promise<T>): Promise<T> => {
      const connection = await Connection.connect({ address: temporalAddress });
      try {
        return await fn(new Client({ connection }));
      } finally {
        await connection.close();
      }
    };
    /** Batches of a plan by the worker that ran them, over every run of its workflow (continue-as-new). */
    const batchesByWorker = (planId: string) =>
      temporalClient(async (client) => {
        const byWorker = new Map<string, number>();
        const runs: string[] = [];
        for await (const w of client.workflow.list({ query: `WorkflowId = "alteration-plan-${planId}"` }))
          runs.push(w.runId);
        for (const runId of runs) {
          const history = await client.workflow.getHandle(`alteration-plan-${planId}`, runId).fetchHistory();
          const scheduled = new Map<string, string>();
          for (const e of history.events ?? []) {
            if (e.activityTaskScheduledEventAttributes)
              scheduled.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '');
            const s = e.activityTaskStartedEventAttributes;
            if (s && scheduled.get(String(s.scheduledEventId)) === 'runJobBatch') {
              const pid = (s.identity ?? '?').split('@')[0]!;
              const name = workers.find((w) => String(w.child.pid) === pid)?.name ?? s.identity ?? '?';
              byWorker.set(name, (byWorker.get(name) ?? 0) + 1);
            }
          }
        }
        return byWorker;
      });
    const describeShares = (m: Map<string, number>) =>
      [...m]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([w, n]) => `${w}: ${n}`)
        .join(', ');

    const submitPlan = async (alterations: unknown[]) => {
      const planId = `cluster-${randomBytes(4).toString('hex')}`;
      const submitted = await call(0, 'POST', '/alterations/submit', {
        id: planId,
        alterations,
        filter: { definitionIds: ['cluster-orders'] },
      });
      if (submitted.status !== 202) throw new Error(`submit: ${submitted.status} ${JSON.stringify(submitted.body)}`);
      return planId;
    };
    const jobsDone = async (planId: string) => {
      const { rows } = await db.query<{ done: number }>(
        'SELECT coalesce(sum(completed + failed), 0)::int AS done FROM alteration_batch_counts WHERE plan_id = $1',
        [planId],
      );
      return rows[0]!.done;
    };
    const planEnded = (planId: string) =>
      waitFor(
        `plan ${planId} to finish`,
        async () => {
          const r = await call(1, 'GET', `/alterations/${planId}`);
          return r.status === 200 && r.body.plan.status >= 4 ? r.body.plan : undefined;
        },
        15 * 60_000,
      );
    /** The plan Completed with every job, each job completed once, each seeded instance written `writes` times. */
    const checkPlan = async (label: string, planId: string, writes: number, value: number) => {
      const final = await planEnded(planId);
      check(
        `${label}: Completed (read through api-2), every job completed`,
        final.status === 4 && final.jobCounts.completed === INSTANCES && final.jobCounts.failed === 0,
        `status ${final.status}, ${JSON.stringify(final.jobCounts)}`,
      );
      const counted = await one(
        `SELECT count(*)::int AS instances, coalesce(max(n), 0)::int AS max, coalesce(min(n), 0)::int AS min
           FROM cluster_instance_writes w JOIN workflow_instances i ON i.id = w.instance_id
          WHERE i.definition_id = 'cluster-orders'`,
      );
      check(
        `${label}: every instance written exactly once by it`,
        counted.instances === INSTANCES && counted.max === writes && counted.min === writes,
        `${counted.instances} instances written, ${counted.min}–${counted.max} writes each (${writes} expected after this plan)`,
      );
      const valued = await one(
        `SELECT count(*)::int AS n FROM workflow_instances WHERE definition_id = 'cluster-orders' AND variables->'amount' = $1::jsonb`,
        [JSON.stringify(value)],
      );
      check(`${label}: every instance holds its value`, valued.n === INSTANCES, `${valued.n} of ${INSTANCES}`);
      const completions = await one(
        'SELECT count(*)::int AS jobs, coalesce(max(n), 0)::int AS max FROM cluster_job_completions WHERE plan_id = $1',
        [planId],
      );
      check(
        `${label}: every job Completed once`,
        completions.jobs === INSTANCES && completions.max === 1,
        `${completions.jobs} jobs completed, at most ${completions.max} time(s) each`,
      );
    };

    // 1. The plan under faults: submitted to node 1; progress read from Postgres (and through node 2 at the end).
    const planId = await submitPlan([
      { type: 'ModifyVariable', variableId: 'amount', value: 777 },
      { type: 'ScheduleActivity', activityId: 'note' },
    ]);
    const planStarted = Date.now();
    log(`plan ${planId} submitted to api-1`);
    const faults: { what: string; atJobs: number; atSeconds: number; stallSeconds: number }[] = [];
    const actions: [string, () => Promise<void>][] = [
      [
        'kill -9 worker-1, start worker-3',
        async () => {
          await kill9(workers[0]!);
          addWorker();
        },
      ],
      [
        'kill -9 the Temporal server, start it again on its databases',
        async () => {
          await temporal!.kill9();
          await temporal!.start();
          trackTemporal();
        },
      ],
      [
        "restart Postgres in immediate mode (SIGQUIT, start): the service's and Temporal's",
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
          const done = await jobsDone(planId);
          return done >= threshold ? done : undefined;
        },
        15 * 60_000,
      );
      const t0 = Date.now();
      log(`fault ${i + 1}: ${what} (jobs done: ${atJobs})`);
      await act();
      const resumedAt = await waitFor(
        'the plan to move again',
        async () => ((await jobsDone(planId)) > atJobs ? Date.now() : undefined),
        10 * 60_000,
      );
      const fault = { what, atJobs, atSeconds: (t0 - planStarted) / 1000, stallSeconds: (resumedAt - t0) / 1000 };
      faults.push(fault);
      log(`  moving again after ${fault.stallSeconds.toFixed(1)} s`);
    }
    await checkPlan('plan 1 (faults)', planId, 1, 777);
    const planSeconds = (Date.now() - planStarted) / 1000;
    const journal = await one(
      `SELECT count(*)::int AS lines, count(DISTINCT j.instance_id)::int AS instances
         FROM journal_entries j JOIN workflow_instances i ON i.id = j.instance_id
        WHERE i.definition_id = 'cluster-orders' AND j.activity_id = 'note'`,
    );
    check(
      'plan 1: its scheduled step ran once on every instance (one journal line each)',
      journal.lines === INSTANCES && journal.instances === INSTANCES,
      `${journal.lines} lines on ${journal.instances} instances`,
    );
    const result = await temporalClient(
      async (client) =>
        (await client.workflow.getHandle(`alteration-plan-${planId}`).result()) as {
          status: string;
          completed: number;
          failed: number;
        },
    );
    check(
      'plan 1: the plan workflow returns the exact counts',
      result.status === 'Completed' && result.completed === INSTANCES && result.failed === 0,
      JSON.stringify(result),
    );
    const plan1 = await batchesByWorker(planId);
    check(
      'plan 1: both workers of each moment ran batches',
      [...plan1.keys()].filter((w) => w.startsWith('worker-')).length >= 2,
      describeShares(plan1),
    );
    summary.push(
      `plan 1: ${INSTANCES} instances in ${planSeconds.toFixed(1)} s; batches by worker: ${describeShares(plan1)}`,
    );
    for (const f of faults)
      summary.push(
        `  survived: ${f.what} at ${f.atSeconds.toFixed(1)} s (${f.atJobs} jobs done); moving again after ${f.stallSeconds.toFixed(1)} s`,
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

    // 2. Scaling out under a running plan: one worker, then three.
    for (const w of alive().slice(1)) await stop(w);
    const [first] = alive();
    log(`one worker left (${first!.name}); plan 2 submitted`);
    const plan2 = await submitPlan([{ type: 'ModifyVariable', variableId: 'amount', value: 888 }]);
    const plan2Started = Date.now();
    await waitFor(
      'a tenth of plan 2',
      async () => ((await jobsDone(plan2)) >= INSTANCES / 10 ? true : undefined),
      10 * 60_000,
    );
    const joined = [addWorker(), addWorker()];
    log(
      `scaled from 1 to 3 workers: ${joined.map((w) => w.name).join(', ')} started with ${await jobsDone(plan2)} jobs done`,
    );
    await checkPlan('plan 2 (1 to 3 workers)', plan2, 2, 888);
    const plan2Seconds = (Date.now() - plan2Started) / 1000;
    const plan2Shares = await batchesByWorker(plan2);
    check(
      'plan 2: the workers that joined ran batches',
      joined.every((w) => (plan2Shares.get(w.name) ?? 0) > 0),
      describeShares(plan2Shares),
    );
    summary.push(
      `plan 2: ${INSTANCES} instances in ${plan2Seconds.toFixed(1)} s, workers scaled 1 to 3 while it ran; batches by worker: ${describeShares(plan2Shares)}`,
    );

    // 3. Spread: three workers from the plan's start.
    const three = alive();
    const plan3 = await submitPlan([{ type: 'ModifyVariable', variableId: 'amount', value: 999 }]);
    const plan3Started = Date.now();
    await checkPlan('plan 3 (3 workers)', plan3, 3, 999);
    const plan3Seconds = (Date.now() - plan3Started) / 1000;
    const plan3Shares = await batchesByWorker(plan3);
    const total = [...plan3Shares.values()].reduce((a, b) => a + b, 0);
    const most = Math.max(...plan3Shares.values());
    check(
      `plan 3: spread over ${three.length} workers, none ran more than ${MAX_SHARE * 100}% of its batches`,
      three.length === 3 && three.every((w) => plan3Shares.has(w.name)) && most <= total * MAX_SHARE,
      `${describeShares(plan3Shares)} of ${total} (the most: ${((100 * most) / total).toFixed(0)}%)`,
    );
    summary.push(
      `plan 3: ${INSTANCES} instances in ${plan3Seconds.toFixed(1)} s on 3 workers; batches by worker: ${describeShares(plan3Shares)}`,
    );

    // 4. Instances through the API, each told to its workflow by the outbox relay and making one outbound call
    // there, while a worker is killed (kill -9) and replaced: each instance's steps recorded once, one workflow
    // each in Temporal, every call made (a call retried after the crash carries the same key).
    const keys = new Map<string, number>();
    const calls = createServer((req, res) => {
      const k = String(req.headers['idempotency-key'] ?? '');
      keys.set(k, (keys.get(k) ?? 0) + 1);
      res.writeHead(200).end('ok');
    });
    await new Promise<void>((resolve) => calls.listen(0, '127.0.0.1', resolve));
    const callsPort = (calls.address() as AddressInfo).port;
    const conn = await call(0, 'POST', '/connection-configuration', {
      name: 'cluster-calls',
      connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
      connectionConfiguration: { baseUrl: `http://127.0.0.1:${callsPort}` },
    });
    const lit = (value: unknown) => ({ typeName: 'String', expression: { type: 'Literal', value } });
    const calling = await call(0, 'POST', '/workflow-definitions', {
      definitionId: 'cluster-calls',
      root: {
        type: 'Elsa.Flowchart',
        id: 'flow1',
        activities: [
          { id: 'start', type: 'Elsa.WriteLine', version: 1, text: lit('started') },
          {
            id: 'call',
            type: 'Elsa.Http.SendHttpRequest',
            version: 1,
            connection: {
              typeName: 'ConnectionProperties<Elsa.Connections.Http.HttpConnectionConfiguration>',
              expression: { type: 'Literal', value: { connectionName: 'cluster-calls' } },
            },
            method: lit('POST'),
            path: lit('/called'),
          },
          { id: 'end', type: 'Elsa.WriteLine', version: 1, text: lit('called') },
        ],
        connections: [
          { source: { activity: 'start', port: 'Done' }, target: { activity: 'call', port: 'In' } },
          { source: { activity: 'call', port: 'Done' }, target: { activity: 'end', port: 'In' } },
        ],
      },
    });
    if (conn.status !== 201 || calling.status !== 201)
      throw new Error(`calls setup: ${conn.status} ${calling.status} ${JSON.stringify(calling.body)}`);
    const instancesStarted = Date.now();
    const startedIds: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        while (next < STARTED) {
          next++;
          const r = await call(w % 2, 'POST', '/workflow-instances', { definitionId: 'cluster-calls' });
          if (r.status !== 202) throw new Error(`start: ${r.status} ${JSON.stringify(r.body)}`);
          startedIds.push(r.body.workflowInstanceId as string);
        }
      }),
    );
    const startSeconds = (Date.now() - instancesStarted) / 1000;
    log(`${STARTED} instances started through api-1 and api-2 in ${startSeconds.toFixed(1)} s`);
    await waitFor('a quarter of the calls', async () => (keys.size >= STARTED / 4 ? true : undefined), 10 * 60_000);
    const victim = alive()[0]!;
    log(`kill -9 ${victim.name} with ${keys.size} of ${STARTED} calls made; start another`);
    await kill9(victim);
    const replacement = addWorker();
    const finished = async () =>
      (
        await db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM workflow_instances WHERE definition_id = 'cluster-calls' AND status = 'Finished'",
        )
      ).rows[0]!.n;
    await waitFor(
      'every started instance to finish',
      async () => ((await finished()) === STARTED ? true : undefined),
      15 * 60_000,
    );
    const runSeconds = (Date.now() - instancesStarted) / 1000;
    const steps = await one(
      `SELECT count(*)::int AS records, count(DISTINCT (instance_id, activity_id))::int AS distinct_steps,
              count(*) FILTER (WHERE status <> 'Completed')::int AS not_completed
         FROM activity_records WHERE instance_id = ANY($1::text[])`,
      [startedIds],
    );
    check(
      'instances: every started instance finished, each of its three steps recorded once',
      steps.records === STARTED * 3 && steps.distinct_steps === STARTED * 3 && steps.not_completed === 0,
      `${steps.records} records, ${steps.distinct_steps} distinct steps, ${steps.not_completed} not Completed, in ${runSeconds.toFixed(1)} s`,
    );
    const lines = await one(
      'SELECT count(*)::int AS n, count(DISTINCT (instance_id, activity_id))::int AS d FROM journal_entries WHERE instance_id = ANY($1::text[])',
      [startedIds],
    );
    check(
      'instances: each WriteLine journalled once',
      lines.n === STARTED * 2 && lines.d === STARTED * 2,
      `${lines.n} lines`,
    );
    const repeated = [...keys.values()].filter((n) => n > 1).length;
    check(
      'instances: every instance called, each with its own Idempotency-Key',
      keys.size === STARTED,
      `${keys.size} keys; ${repeated} call(s) made again after the crash with the same key`,
    );
    let counted = '';
    const told = await waitFor(
      'Temporal to count every instance Completed',
      () =>
        temporalClient(async (client) => {
          const count = async (query: string) => Number((await client.workflow.count(query)).count);
          const base = 'WorkflowType = "instanceExecution" AND WorkflowDefinitionId = "cluster-calls"';
          const n = await count(base);
          const done = await count(
            `${base} AND ExecutionStatus = "Completed" AND WorkflowInstanceStatus = "Finished/Finished"`,
          );
          const running = await count(`${base} AND ExecutionStatus = "Running"`);
          const outbox = (await one('SELECT count(*)::int AS n FROM instance_outbox')).n;
          counted = `${n} workflow runs, ${done} Completed as Finished/Finished, ${running} Running, ${outbox} outbox rows`;
          return n === STARTED && done === STARTED && outbox === 0 ? { n, done } : undefined;
        }),
      5 * 60_000,
    ).catch(() => undefined);
    check(
      'instances: one workflow per instance in Temporal, each Completed as Finished/Finished, the outbox empty',
      told !== undefined,
      told ? `${told.n} workflows, ${told.done} Completed` : `not within 5 min: ${counted}`,
    );
    // The audit trail: both API nodes wrote it all along, across the Postgres restart; now both at once.
    const roles = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        call(i % 2, 'POST', '/identity/roles', { name: `cluster-role-${i}`, permissions: ['alterations:view'] }),
      ),
    );
    const verified = await call(0, 'GET', '/audit/verify');
    const trail = await one(
      "SELECT count(*)::int AS n, min(seq)::int AS first, max(seq)::int AS last FROM audit_entries WHERE tenant_id = ''",
      [],
    );
    check(
      'audit: one gapless chain from two API nodes, across the Postgres restart, that verifies',
      roles.every((r) => r.status === 201) &&
        verified.body?.ok === true &&
        verified.body.checked === trail.n &&
        trail.first === 1 &&
        trail.last === trail.n,
      `${roles.filter((r) => r.status === 201).length} of 40 roles made; verify ${JSON.stringify(verified.body)}; ${trail.n} entries, seq ${trail.first} to ${trail.last}`,
    );
    calls.close();
    summary.push(
      `instances: ${STARTED} started in ${startSeconds.toFixed(1)} s, all finished ${runSeconds.toFixed(1)} s after the first start; ${victim.name} killed (kill -9) mid-way, ${replacement.name} started; ${repeated} call(s) made again with the same key`,
    );
    await db.end();

    log('summary:');
    for (const line of summary) log(`  ${line}`);
  } catch (err) {
    check('the scenario ran to its end', false, err instanceof Error ? err.message : String(err));
  } finally {
    // The service's processes, then Temporal, then the Postgres both keep their state in.
    await stopAll((p) => p.name !== 'postgres');
    await temporal?.stop();
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
