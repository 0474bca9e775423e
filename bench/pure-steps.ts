/**
 * Pure steps past the inline cap: `npm run bench:pure-steps`.
 *
 * One process: embedded Postgres (a fresh cluster in a temporary folder) or DATABASE_URL's server, a Temporal dev
 * server (or TEMPORAL_ADDRESS), one workflow bundle, and the service as production wires it (`createService`, API
 * and worker in process, the API driven through `app.request()` with an admin key). Then:
 *
 * 1. **chain**: a definition of BENCH_PURE_CHAIN (4,000) WriteLine steps in a row is published; one instance is
 *    started (`POST /workflow-instances`), and the bench times until Postgres shows it Finished, then checks that
 *    every step has its journal line, in order, and its Completed record;
 * 2. **fan-out**: a definition of one WriteLine followed by BENCH_PURE_FANOUT (2,000) Event steps (all successors of
 *    the WriteLine, each its own event name); one instance, timed until it holds all its bookmarks;
 * 3. **fan-out x BENCH_PURE_PARALLEL (8)**: that many instances of it started side by side, timed until every one
 *    holds all its bookmarks.
 *
 * Each phase ends when done or after BENCH_PURE_TIMEOUT_MS (default 10 min: the figure is then "not within", with
 * how far it got). For each, the instance's Temporal history is read: its events, its activity tasks and local
 * activity markers by activity type (the Temporal round trips).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { createApiKey } from '../src/auth/api-keys.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { createLogger } from '../src/logger.js';
import { createService } from '../src/service/index.js';
import { installTemporalRuntime } from '../src/temporal/runtime.js';
import { instanceWorkflowId } from '../src/temporal/names.js';
import { slimWorkflowBundle, WORKFLOW_INTERCEPTORS_PATH, WORKFLOWS_PATH } from '../src/temporal/worker.js';
import { benchServers } from './servers.js';
import { dbUrl, recreateDatabase, round, sleep } from './util.js';

const intEnv = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const CHAIN = intEnv('BENCH_PURE_CHAIN', 4000);
const FANOUT = intEnv('BENCH_PURE_FANOUT', 2000);
const PARALLEL = intEnv('BENCH_PURE_PARALLEL', 8);
const TIMEOUT_MS = intEnv('BENCH_PURE_TIMEOUT_MS', 10 * 60_000);
const POLL_MS = 50;

const log = (msg: string) => process.stdout.write(`[pure-steps] ${msg}\n`);
const lit = (value: unknown) => ({ typeName: 'String', expression: { type: 'Literal', value } });
const connect = (source: string, target: string) => ({
  source: { activity: source, port: 'Done' },
  target: { activity: target, port: 'In' },
});

/** `n` WriteLine steps in a row: `w0` → `w1` → … */
export function chainDefinition(definitionId: string, n: number) {
  const ids = Array.from({ length: n }, (_, i) => `w${i}`);
  return {
    definitionId,
    root: {
      type: 'Elsa.Flowchart',
      id: 'flow',
      activities: ids.map((id, i) => ({ id, type: 'Elsa.WriteLine', version: 1, text: lit(`line ${i}`) })),
      connections: ids.slice(1).map((id, i) => connect(ids[i]!, id)),
    },
  };
}

/** One WriteLine `start`, then `n` Event steps `e0`…, all its successors, each waiting on its own event. */
export function fanOutDefinition(definitionId: string, n: number) {
  const ids = Array.from({ length: n }, (_, i) => `e${i}`);
  return {
    definitionId,
    root: {
      type: 'Elsa.Flowchart',
      id: 'flow',
      activities: [
        { id: 'start', type: 'Elsa.WriteLine', version: 1, text: lit('fan out') },
        ...ids.map((id, i) => ({ id, type: 'Elsa.Event', version: 1, eventName: lit(`ev${i}`) })),
      ],
      connections: ids.map((id) => connect('start', id)),
    },
  };
}

interface Phase {
  name: string;
  target: string;
  ms: number | null;
  reached: string;
  temporal: {
    events: number;
    activityTasks: Record<string, number>;
    localActivities: Record<string, number>;
    error?: string;
  }[];
}

async function main() {
  const stops: (() => Promise<unknown>)[] = [];
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-pure-bench-'));
  stops.push(() => rm(work, { recursive: true, force: true }));
  const config = loadConfig();
  const logger = createLogger('warn');
  await installTemporalRuntime(logger);
  try {
    const { adminUrl, temporalAddress: address } = await benchServers(config, work, stops);
    const { code } = await bundleWorkflowCode({
      workflowsPath: WORKFLOWS_PATH,
      workflowInterceptorModules: [WORKFLOW_INTERCEPTORS_PATH],
      logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
    });
    const bundle = path.join(work, 'workflow-bundle.js');
    await writeFile(bundle, slimWorkflowBundle(code));

    const database = `wfa_pure_bench_${process.pid}`;
    await recreateDatabase(adminUrl, database);
    const url = dbUrl(adminUrl, database);
    const db = createPool(url, 2);
    stops.unshift(() => db.end());
    await migrate(db);

    const service = await createService(
      {
        ...config,
        databaseUrl: url,
        authSigningKey: randomBytes(32).toString('base64url'),
        adminApiKey: `wfa_unused_${randomBytes(8).toString('hex')}`,
        maxBodyBytes: 16 * 1024 * 1024,
        temporal: { ...config.temporal, address, taskQueue: `wfa-pure-bench-${process.pid}` },
      },
      { logger, listen: false, workflowBundlePath: bundle },
    );
    stops.unshift(() => service.stop());
    const key = (await createApiKey(service.pool, { name: 'bench admin', permissions: ['*'], tenantKey: '' })).key;
    const api = async (method: string, p: string, body?: unknown) => {
      const text = body === undefined ? undefined : JSON.stringify(body);
      const res = await service.app!.request(p, {
        method,
        headers: { authorization: `ApiKey ${key}`, ...(text ? { 'content-type': 'application/json' } : {}) },
        ...(text ? { body: text } : {}),
      });
      const raw = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status} ${raw.slice(0, 500)}`);
      return raw ? JSON.parse(raw) : undefined;
    };
    const start = async (definitionId: string): Promise<string> =>
      (await api('POST', '/workflow-instances', { definitionId })).workflowInstanceId as string;

    const temporalOf = async (ids: string[]) =>
      Promise.all(
        ids.map(async (id) => {
          const history = await service.client.workflow
            .getHandle(instanceWorkflowId(id))
            .fetchHistory()
            .catch((err: Error) => ({ error: err.message.slice(0, 120), events: undefined }));
          if ('error' in history) return { events: -1, activityTasks: {}, localActivities: {}, error: history.error };
          const activityTasks: Record<string, number> = {};
          const localActivities: Record<string, number> = {};
          for (const e of history.events ?? []) {
            const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
            if (name) activityTasks[name] = (activityTasks[name] ?? 0) + 1;
            if (e.markerRecordedEventAttributes?.markerName === 'core_local_activity') {
              const data = e.markerRecordedEventAttributes.details?.data?.payloads?.[0]?.data;
              const type = data
                ? (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }).activity_type
                : '?';
              localActivities[type] = (localActivities[type] ?? 0) + 1;
            }
          }
          return { events: history.events?.length ?? 0, activityTasks, localActivities };
        }),
      );

    /** Polls `progress()` (done, and a word on how far) until done or the timeout. */
    const until = async (t0: number, progress: () => Promise<{ done: boolean; reached: string }>) => {
      let last = t0;
      for (;;) {
        const p = await progress();
        const now = performance.now();
        if (p.done) return { ms: round(now - t0), reached: p.reached };
        if (now - t0 > TIMEOUT_MS) return { ms: null, reached: p.reached };
        if (now - last > 10_000) {
          log(`  ${round((now - t0) / 1000)} s: ${p.reached}`);
          last = now;
        }
        await sleep(POLL_MS);
      }
    };
    const phases: Phase[] = [];

    // 1. The chain.
    await api('POST', '/workflow-definitions', chainDefinition('pure-chain', CHAIN));
    log(`chain of ${CHAIN} WriteLine steps: starting one instance`);
    let t0 = performance.now();
    const chainId = await start('pure-chain');
    const requestMs = round(performance.now() - t0);
    const chain = await until(t0, async () => {
      const { rows } = await db.query<{ status: string; n: number }>(
        `SELECT status, (SELECT count(*)::int FROM journal_entries j WHERE j.instance_id = i.id) AS n
           FROM workflow_instances i WHERE id = $1`,
        [chainId],
      );
      return { done: rows[0]?.status === 'Finished', reached: `${rows[0]?.n ?? 0} of ${CHAIN} journal lines` };
    });
    const { rows: lines } = await db.query<{ message: string }>(
      'SELECT message FROM journal_entries WHERE instance_id = $1 ORDER BY id',
      [chainId],
    );
    const inOrder = lines.length === CHAIN && lines.every((l, i) => l.message === `line ${i}`);
    const { rows: recs } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM activity_records WHERE instance_id = $1 AND status = 'Completed'`,
      [chainId],
    );
    log(
      `chain: ${chain.ms === null ? `not finished within ${TIMEOUT_MS / 1000} s` : `finished in ${chain.ms} ms`} ` +
        `(start request ${requestMs} ms; ${chain.reached}; journal in order: ${inOrder}; ${recs[0]!.n} Completed records)`,
    );
    await sleep(1000);
    phases.push({
      name: `chain of ${CHAIN} WriteLine`,
      target: 'Finished',
      ...chain,
      temporal: await temporalOf([chainId]),
    });

    // 2. and 3. The fan-out, one instance, then several side by side.
    await api('POST', '/workflow-definitions', fanOutDefinition('pure-fanout', FANOUT));
    for (const n of [1, PARALLEL]) {
      log(`fan-out to ${FANOUT} Event steps: ${n} instance(s)`);
      t0 = performance.now();
      const ids = await Promise.all(Array.from({ length: n }, () => start('pure-fanout')));
      const r = await until(t0, async () => {
        const { rows } = await db.query<{ b: number }>(
          'SELECT jsonb_array_length(bookmarks) AS b FROM workflow_instances WHERE id = ANY($1)',
          [ids],
        );
        const total = rows.reduce((a, x) => a + x.b, 0);
        return {
          done: rows.length === n && rows.every((x) => x.b === FANOUT),
          reached: `${total} of ${n * FANOUT} bookmarks`,
        };
      });
      log(`fan-out x${n}: ${r.ms === null ? `not within ${TIMEOUT_MS / 1000} s` : `${r.ms} ms`} (${r.reached})`);
      await sleep(1000);
      phases.push({
        name: `fan-out to ${FANOUT} Event x${n}`,
        target: 'all bookmarks',
        ...r,
        temporal: await temporalOf(ids.slice(0, 1)),
      });
    }

    process.stdout.write(
      `\nMachine: nproc ${os.cpus().length}, ${os.cpus()[0]?.model ?? '?'}, ${round(os.totalmem() / 2 ** 30)} GiB; node ${process.version}\n`,
    );
    for (const p of phases) {
      const t = p.temporal[0]!;
      process.stdout.write(
        `${p.name.padEnd(34)} ${p.target.padEnd(14)} ${(p.ms === null ? `> ${TIMEOUT_MS / 1000} s` : `${round(p.ms / 1000, 2)} s`).padStart(10)}` +
          `   (${p.reached}; history of one: ${t.error ? `unread: ${t.error}` : `${t.events} events, activity tasks ${JSON.stringify(t.activityTasks)}, local ${JSON.stringify(t.localActivities)}`})\n`,
      );
    }
  } finally {
    for (const stop of stops) await stop().catch((err) => log(`stopping: ${String(err)}`));
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
