/**
 * What the audit trail costs a state-changing request: `npm run bench:audit`.
 *
 * One process: embedded Postgres (or DATABASE_URL's server), a Temporal dev server (or TEMPORAL_ADDRESS), and two
 * API services as production wires them (`createService`, driven through `app.request()`), on one database: one
 * with the audit trail, one without (the `auditTrail: false` override, which only this bench sets). The same
 * requests go to both, interleaved (with, without, without, with, …) so that both see the same database state,
 * AUDIT_BENCH_N times each (1,000) after 100 that warm up:
 *   - `PUT /alterations/policy`: a change of one statement, whose entry is written after it, alone;
 *   - `POST /alterations/submit`: a plan (over one id that matches nothing): a transaction, whose entry commits
 *     inside it, and its workflow's start;
 *   - `POST /identity/roles`: another change of one statement.
 * Medians and 95th percentiles of each side, and their ratio; results in bench/results/audit-latest.json.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApiKey } from '../src/auth/api-keys.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { createLogger } from '../src/logger.js';
import { createService, type Service } from '../src/service/index.js';
import { installTemporalRuntime } from '../src/temporal/runtime.js';
import { benchServers } from './servers.js';
import { dbUrl, recreateDatabase, round } from './util.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS_FILE = process.env.AUDIT_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'audit-latest.json');
const N = Number(process.env.AUDIT_BENCH_N ?? 1000);
const WARM = 100;
const log = (msg: string) => process.stdout.write(`[audit] ${msg}\n`);

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return round(s[Math.min(s.length - 1, Math.floor(s.length * p))]!);
};

async function main() {
  const stops: (() => Promise<unknown>)[] = [];
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-audit-bench-'));
  stops.push(() => rm(work, { recursive: true, force: true }));
  const config = loadConfig();
  const logger = createLogger('warn');
  await installTemporalRuntime(logger);
  try {
    const { adminUrl, temporalAddress: address } = await benchServers(config, work, stops);
    const database = `wfa_audit_bench_${process.pid}`;
    await recreateDatabase(adminUrl, database);
    const url = dbUrl(adminUrl, database);
    const db = createPool(url, 2);
    stops.unshift(() => db.end());
    await migrate(db);

    const start = async (auditTrail: boolean) => {
      const service = await createService(
        {
          ...config,
          databaseUrl: url,
          authSigningKey: randomBytes(32).toString('base64url'),
          adminApiKey: `wfa_unused_${randomBytes(8).toString('hex')}`,
          temporal: { ...config.temporal, address, taskQueue: `wfa-audit-bench-${process.pid}` },
        },
        { role: 'api', logger, listen: false, auditTrail },
      );
      stops.unshift(() => service.stop());
      return service;
    };
    const withTrail = await start(true);
    const without = await start(false);
    const key = (await createApiKey(db, { name: 'bench admin', permissions: ['*'], tenantKey: '' })).key;
    const call = async (service: Service, method: string, p: string, body: unknown) => {
      const t = performance.now();
      const res = await service.app!.request(p, {
        method,
        headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      await res.arrayBuffer();
      const ms = performance.now() - t;
      if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status}`);
      return ms;
    };

    const requests: Record<string, (i: number) => [string, string, unknown]> = {
      'PUT /alterations/policy (one statement)': (i) => [
        'PUT',
        '/alterations/policy',
        { approval: 'above', approvalThreshold: 1000 + i, approvalTtlSeconds: 3600 },
      ],
      'POST /alterations/submit (a plan: a transaction and a Temporal start)': (i) => [
        'POST',
        '/alterations/submit',
        { alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: [`none-${i}`] } },
      ],
      'POST /identity/roles (one statement)': (i) => [
        'POST',
        '/identity/roles',
        { name: `role-${i}-${randomBytes(3).toString('hex')}`, permissions: ['alterations:view'] },
      ],
    };
    const results: Record<string, unknown> = {
      date: new Date().toISOString(),
      command: 'npm run bench:audit',
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGiB: round(os.totalmem() / 2 ** 30) },
      n: N,
    };
    for (const [name, make] of Object.entries(requests)) {
      const times = { with: [] as number[], without: [] as number[] };
      for (let i = 0; i < N + WARM; i++) {
        // Alternating which goes first: neither always finds the other's work just done.
        const order: ['with' | 'without', Service][] =
          i % 2
            ? [
                ['with', withTrail],
                ['without', without],
              ]
            : [
                ['without', without],
                ['with', withTrail],
              ];
        for (const [side, service] of order) {
          const ms = await call(service, ...make(2 * i + (side === 'with' ? 0 : 1)));
          if (i >= WARM) times[side].push(ms);
        }
      }
      const summary = {
        withTrail: { medianMs: percentile(times.with, 0.5), p95Ms: percentile(times.with, 0.95) },
        without: { medianMs: percentile(times.without, 0.5), p95Ms: percentile(times.without, 0.95) },
      };
      const ratio = round(summary.withTrail.medianMs / summary.without.medianMs);
      results[name] = { ...summary, medianRatio: ratio };
      log(
        `${name}: with the trail median ${summary.withTrail.medianMs} ms (p95 ${summary.withTrail.p95Ms}), without ${summary.without.medianMs} ms (p95 ${summary.without.p95Ms}): ${ratio}x`,
      );
    }
    const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM audit_entries');
    log(`entries written: ${rows[0]!.n}`);
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    for (const stop of stops) await stop().catch((err) => log(`stop failed: ${String(err)}`));
  }
}

await main();
