/**
 * The service as production wires it, in this process on a fresh database, its API called through
 * `app.request()` with an admin key; and the seed every size starts from.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { createApiKey } from '../../src/auth/api-keys.js';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { createLogger } from '../../src/logger.js';
import { createService } from '../../src/service/index.js';
import { instrumentPool, timingInterceptor } from '../instrument.js';
import { dbUrl, recreateDatabase, seedWithoutWorkflows } from '../util.js';
import { DEFINITION, DEFINITION_ID, FRESH_PAGES, RECORD_UNDO, SEED_SQL } from './settings.js';

export type Api = (<T = any>(method: string, path: string, body?: unknown) => Promise<{ status: number; body: T }>) & {
  /** The raw response, for a body read as a stream. */
  raw(method: string, path: string, body?: unknown): Promise<Response>;
};

export function expectStatus(r: { status: number; body: unknown }, status: number, what: string): void {
  if (r.status !== status) throw new Error(`${what}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
}

/** The service as production wires it (src/service.ts), in process, on a fresh database; both pools counted. */
export async function startBenchService(n: number) {
  const adminUrl = process.env.BENCH_PG_ADMIN_URL!;
  const address = process.env.BENCH_TEMPORAL_ADDRESS!;
  const config = loadConfig();
  const database = `wfa_bench_${n}`;
  await recreateDatabase(adminUrl, database);
  const url = dbUrl(adminUrl, database);
  // The bench's own statements (seed, verify, the raw UPDATE) go through a pool of their own, uncounted.
  const benchPool = createPool(url, 2);
  await migrate(benchPool);
  const service = await createService(
    {
      ...config,
      databaseUrl: url,
      authSigningKey: randomBytes(32).toString('base64url'),
      adminApiKey: `wfa_unused_${randomBytes(8).toString('hex')}`,
      temporal: { ...config.temporal, address, taskQueue: `wfa-bench-${n}-${process.pid}` },
    },
    {
      logger: createLogger('warn'),
      listen: false,
      workflowBundlePath: process.env.BENCH_WORKFLOW_BUNDLE,
      workerOptions: { interceptors: { activity: [timingInterceptor] } },
      onPool: (p) => instrumentPool(p),
      recordUndo: RECORD_UNDO,
    },
  );
  const app = service.app!;
  const admin = await createApiKey(service.pool, { name: 'bench admin', permissions: ['*'], tenantKey: '' });
  const send = (method: string, p: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `ApiKey ${admin.key}` };
    let text: string | undefined;
    if (body !== undefined) {
      text = JSON.stringify(body);
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(text));
    }
    return app.request(p, { method, headers, ...(text !== undefined ? { body: text } : {}) });
  };
  const api = Object.assign(
    async (method: string, p: string, body?: unknown) => {
      const res = await send(method, p, body);
      const raw = await res.text();
      return { status: res.status, body: raw ? JSON.parse(raw) : undefined };
    },
    { raw: send },
  ) as Api;
  const stop = async () => {
    await service.stop();
    await benchPool.end();
  };
  return { config, service, benchPool, api, key: admin.key, stop };
}

/** Definition through the API, N instances in one statement, statistics. */
export async function seed(api: Api, benchPool: pg.Pool, n: number): Promise<number> {
  const def = await api<{ id: string }>('POST', '/workflow-definitions', DEFINITION);
  expectStatus(def, 201, 'publish definition');
  const t = performance.now();
  const seeded = await seedWithoutWorkflows(benchPool, SEED_SQL, [def.body.id, n]);
  const seedMs = performance.now() - t;
  if (seeded.rowCount !== n) throw new Error(`seeded ${seeded.rowCount} instances, expected ${n}`);
  // The floor's runs each find their rows written before and vacuumed: room on the pages for a heap-only write
  // (migration 025). The plan finds the same, as in a table of instances that live and change: every row is
  // written once more and vacuumed (since 2026-11-27; BENCH_FRESH_PAGES=1 plans on the freshly inserted pages).
  if (!FRESH_PAGES) {
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    const written = await benchPool.query(
      `UPDATE workflow_instances SET revision = revision WHERE tenant_id = '' AND definition_id = $1`,
      [DEFINITION_ID],
    );
    if (written.rowCount !== n) throw new Error(`wrote ${written.rowCount} instances once more, expected ${n}`);
  }
  await benchPool.query('VACUUM ANALYZE workflow_instances');
  await benchPool.query('CHECKPOINT').catch(() => undefined); // superuser only; just less noise
  return seedMs;
}
