import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Client } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';
import pg from 'pg';
import { inject } from 'vitest';
import type { createApp } from '../../src/api/app.js';
import { createApiKey } from '../../src/auth/api-keys.js';
import type { TokenSettings } from '../../src/auth/tokens.js';
import { type Config, loadConfig } from '../../src/config.js';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import type { DefinitionCache } from '../../src/engine/definitions.js';
import { createLogger } from '../../src/logger.js';
import { createService } from '../../src/service/index.js';
import type { WorkerRole } from '../../src/service/workers.js';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body text (for malformed JSON); sent as is. */
  rawBody?: string;
  /** API key to send; null sends no credentials. Defaults to the harness admin key. */
  key?: string | null;
  headers?: Record<string, string>;
}

/**
 * One test file's world: its own database cloned from the migrated template, its own Temporal task
 * queue with a real worker, the HTTP app in process, an admin API key, and the log lines written.
 */
export interface Harness {
  /** The API's pool; tests use it for direct SQL too. */
  pool: pg.Pool;
  /** The worker's own pool. */
  workerPool: pg.Pool;
  databaseUrl: string;
  client: Client;
  taskQueue: string;
  /** The name of its database (another harness can start on it: `createHarness({ database })`). */
  database: string;
  definitions: DefinitionCache;
  tokens: TokenSettings;
  adminKey: string;
  logs: Record<string, unknown>[];
  app: ReturnType<typeof createApp>;
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse<T>>;
  /** Creates an API key with these grants in a tenant (null: default). */
  keyWith(permissions: string[], tenantId?: string | null): Promise<string>;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  /** The service's worker side (undefined where it runs none). */
  readonly workers: WorkerRole | undefined;
  close(): Promise<void>;
}

export async function createHarness(
  opts: {
    worker?: boolean;
    permissionModel?: 'structured' | 'legacy';
    alterations?: { batchSize: number; window: number; batchesPerRun: number };
    /** CONNECTIONS_ENCRYPTION_KEY */
    encryptionKey?: string;
    accessTokenLifetimeSeconds?: number;
    /** OUTBOUND_HTTP_ALLOW_NETWORKS of the worker; tests call local servers, so loopback by default. */
    outboundAllowNetworks?: string[];
    /** API_STATEMENT_TIMEOUT_MS of the API pool. */
    apiStatementTimeoutMs?: number;
    /** The clock tokens are issued and checked with (tests of expiry move it). */
    clock?: () => Date;
    /** Tenant shares (contract section 8) other than the defaults. */
    shares?: Partial<Config['shares']>;
    /** TRUSTED_PROXIES */
    trustedProxies?: string[];
    /** Settings over the harness's own (e.g. the previous keys of a rotation). */
    config?: Partial<Config>;
    /** Worker options over the harness's own (a test's activity interceptor that loses an answer). */
    workerOptions?: Partial<WorkerOptions>;
    /** The database of another harness, kept when this one closes (a restart with other settings). */
    database?: string;
    /** METRICS_PUBLIC */
    metricsPublic?: boolean;
    /** A Temporal other than the suite's (TEMPORAL_ADDRESS, with its TLS and API key). */
    temporal?: Pick<Config['temporal'], 'address' | 'tls' | 'apiKey'>;
    /** Tracing on, its spans to this processor (an in-memory exporter's). */
    spanProcessor?: SpanProcessor;
    /** How long a stopping worker waits for its eager starts in flight (10 s by default). */
    eagerStartsStopWaitMs?: number;
  } = {},
): Promise<Harness> {
  const suffix = randomBytes(5).toString('hex');
  const adminUrl = inject('pgAdminUrl');
  const database = opts.database ?? `wfa_test_${suffix}`;
  if (!opts.database) await ensureDatabase(adminUrl, database, inject('templateDatabase'));
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const databaseUrl = url.toString();

  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const taskQueue = `test-${suffix}`;
  // The service as production wires it (src/service.ts), on this file's database and task queue.
  const base = loadConfig({});
  const config: Config = {
    ...base,
    databaseUrl,
    // Set, so that no bootstrap key is generated into the database; the tests use `adminKey` below.
    adminApiKey: `wfa_unused_${suffix}`,
    authSigningKey: `test signing key ${suffix}`,
    accessTokenLifetimeSeconds: opts.accessTokenLifetimeSeconds ?? 900,
    refreshTokenLifetimeSeconds: 3600,
    permissionModel: opts.permissionModel ?? 'structured',
    connectionsEncryptionKey: opts.encryptionKey,
    maxBodyBytes: 64 * 1024,
    // Tests call local servers: loopback by default.
    outboundAllowNetworks: opts.outboundAllowNetworks ?? ['127.0.0.0/8'],
    trustedProxies: opts.trustedProxies ?? [],
    temporal: {
      ...base.temporal,
      address: inject('temporalAddress'),
      namespace: 'default',
      taskQueue,
      uiPort: 0,
      ...opts.temporal,
    },
    database: {
      ...base.database,
      apiPoolSize: 10,
      workerPoolSize: 10,
      apiStatementTimeoutMs: opts.apiStatementTimeoutMs ?? 15_000,
    },
    shares: { ...base.shares, apiConnectionsPerTenant: 5, ...opts.shares },
    alterations: opts.alterations ?? { batchSize: 100, window: 2, batchesPerRun: 500 },
    metrics: { public: opts.metricsPublic ?? false, port: undefined },
    ...opts.config,
  };
  const service = await createService(config, {
    logger: createLogger('debug', sink),
    runtimeLogger: createLogger('error'),
    listen: false,
    startWorker: opts.worker !== false,
    workflowBundlePath: inject('workflowBundlePath'),
    workerOptions: { shutdownGraceTime: '2 seconds', ...opts.workerOptions },
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.spanProcessor ? { spanProcessor: opts.spanProcessor } : {}),
    ...(opts.eagerStartsStopWaitMs !== undefined ? { eagerStartsStopWaitMs: opts.eagerStartsStopWaitMs } : {}),
  });
  const pool = service.apiPool!;
  const app = service.app!;
  const admin = await createApiKey(pool, { name: 'test admin', permissions: ['*'], tenantKey: '' });

  const harness: Harness = {
    pool,
    workerPool: service.workerPool!,
    databaseUrl,
    database,
    client: service.client,
    taskQueue,
    definitions: service.definitions,
    tokens: service.tokens,
    adminKey: admin.key,
    logs,
    app,
    async request(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      const key = o.key === undefined ? admin.key : o.key;
      if (key !== null) headers.authorization = `ApiKey ${key}`;
      let body: string | undefined;
      if (o.rawBody !== undefined) body = o.rawBody;
      else if (o.body !== undefined) body = JSON.stringify(o.body);
      if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
        headers['content-type'] = 'application/json';
      }
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      const res = await app.request(path, { method, headers, ...(body !== undefined ? { body } : {}) });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: res.status, headers: res.headers, body: parsed as any };
    },
    async keyWith(permissions, tenantId = null) {
      const created = await createApiKey(pool, {
        name: `test ${permissions.join(',')}`,
        permissions,
        tenantKey: tenantId ?? '',
      });
      return created.key;
    },
    startWorker: () => service.startWorker(),
    stopWorker: () => service.stopWorker(),
    get workers() {
      return service.workers;
    },
    async close() {
      await service.stop();
      if (opts.database) return;
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    },
  };
  return harness;
}

/** Polls until `check` returns a value that is not undefined, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`, { cause: last });
    await new Promise((r) => setTimeout(r, 50));
  }
}
