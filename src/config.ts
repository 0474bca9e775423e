import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import type { TracingSettings } from './tracing.js';
import { postgresConnection } from './db/postgres-connection.js';
import { parseNetworks } from './vocabulary/networks.js';
import { assertKeyMatches, readCertificates, readPrivateKey } from './vocabulary/pem.js';

/** Empty strings in the environment read as "unset", so `FOO= npm start` behaves like no FOO at all. */
const optional = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

/** An OTLP endpoint: an http(s) URL (the OTLP/HTTP exporter's). */
const otlpUrl = optional.refine(
  (v) => v === undefined || (/^https?:\/\//i.test(v) && URL.canParse(v)),
  'must be an http(s) URL, e.g. http://localhost:4318',
);

/** A whole number from the environment, within its bounds, with its default (or optional when none). */
const int = (min: number, max: number, fallback: number) => z.coerce.number().int().min(min).max(max).default(fallback);
const optionalInt = (min: number, max: number) => z.coerce.number().int().min(min).max(max).optional();
const port = (fallback: number) => int(0, 65535, fallback);

const ConfigSchema = z.object({
  PORT: port(3000),
  DATA_DIR: z.string().default('.data'),
  DATABASE_URL: optional,
  EMBEDDED_POSTGRES_PORT: port(54329),
  TEMPORAL_ADDRESS: optional,
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('workflow-alterations'),
  TEMPORAL_CLI_PATH: optional,
  TEMPORAL_TLS: optional.pipe(z.enum(['true', 'false']).optional()),
  TEMPORAL_TLS_CA: optional,
  TEMPORAL_TLS_CERT: optional,
  TEMPORAL_TLS_KEY: optional,
  TEMPORAL_TLS_SERVER_NAME: optional,
  TEMPORAL_API_KEY: optional,
  TEMPORAL_UI_PORT: port(8233),
  TEMPORAL_UI_URL: optional.refine(
    (v) => v === undefined || (/^https?:\/\//i.test(v) && URL.canParse(v)),
    'must be an http(s) URL, e.g. https://temporal.example.com',
  ),
  TEMPORAL_DEV_SERVER_PORT: port(7233),
  ADMIN_API_KEY: optional,
  ADMIN_PASSWORD: optional,
  AUTH_SIGNING_KEY: optional,
  AUTH_SIGNING_KEY_PREVIOUS: optional,
  ACCESS_TOKEN_LIFETIME: z.coerce.number().int().positive().default(900),
  REFRESH_TOKEN_LIFETIME: z.coerce
    .number()
    .int()
    .positive()
    .default(14 * 24 * 3600),
  PERMISSION_MODEL: z.enum(['structured', 'legacy']).default('structured'),
  CONNECTIONS_ENCRYPTION_KEY: optional,
  CONNECTIONS_ENCRYPTION_KEY_PREVIOUS: optional,
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(1024 * 1024),
  REQUEST_BODY_TIMEOUT_MS: int(100, 3_600_000, 10_000),
  OUTBOUND_HTTP_ALLOW_NETWORKS: z.string().default(''),
  TRUSTED_PROXIES: z.string().default(''),
  EVENT_STREAMS_PER_TENANT: int(1, 100_000, 50),
  EVENT_STREAMS_PER_NODE: int(1, 100_000, 1000),
  TENANT_API_CONNECTIONS: optionalInt(1, 500),
  TENANT_API_REQUESTS: int(1, 10_000, 8),
  ANONYMOUS_API_REQUESTS: int(1, 10_000, 4),
  TENANT_OUTBOUND_CALLS: int(1, 10_000, 5),
  WORKER_OUTBOUND_CALL_SLOTS: int(1, 10_000, 50),
  WORKER_INLINE_CALL_MAX_MS: int(0, 300_000, 10_000),
  TENANT_TEMPORAL_REQUESTS: int(1, 10_000, 16),
  WORKER_BATCH_SLOTS: optionalInt(1, 498),
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: int(1_000, 3_600_000, 60_000),
  API_STATEMENT_TIMEOUT_MS: int(100, 3_600_000, 15_000),
  DATABASE_POOL_API: int(1, 500, 10),
  DATABASE_POOL_WORKER: int(5, 500, 20),
  ALTERATION_BATCH_SIZE: int(1, 10_000, 2000),
  ALTERATION_BATCH_WINDOW: int(1, 32, 4),
  ALTERATION_BATCHES_PER_RUN: int(1, 2000, 500),
  XDG_CACHE_HOME: optional,
  WORKER_CACHED_WORKFLOWS: int(2, 100_000, 100),
  TRIGGER_INLINE_INSTANCES: int(0, 100_000, 1000),
  PLAN_RETENTION_DAYS: int(1, 36_500, 90),
  INSTANCE_RETENTION_DAYS: optionalInt(1, 36_500),
  AUDIT_RETENTION_DAYS: int(30, 36_500, 400),
  RETENTION_SWEEP_SECONDS: int(10, 86_400, 600),
  HEAP_GROWING_PERCENT: int(0, 1000, 30),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpUrl,
  OTEL_SERVICE_NAME: optional,
  OTEL_SDK_DISABLED: optional,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['auto', 'pretty', 'json']).default('auto'),
  METRICS_PUBLIC: optional.pipe(z.enum(['true', 'false']).optional()),
  METRICS_PORT: optional.pipe(z.coerce.number<string | undefined>().int().min(1).max(65535).optional()),
});

/** The service configuration: read from the environment once, at start, and passed down explicitly. */
export interface Config {
  port: number;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Port of the embedded Postgres (loopback), used when no DATABASE_URL is set. */
  embeddedPostgresPort: number;
  temporal: {
    address: string | undefined;
    namespace: string;
    taskQueue: string;
    cliPath: string | undefined;
    uiPort: number;
    /**
     * The Temporal Web UI the console links plans to (TEMPORAL_UI_URL), without a trailing slash; unset: the
     * embedded dev server's UI (http://localhost:TEMPORAL_UI_PORT) when there is one, else no link.
     */
    uiUrl: string | undefined;
    /** TLS to TEMPORAL_ADDRESS (TEMPORAL_TLS…); undefined: plain. */
    tls: TemporalTls | undefined;
    /** TEMPORAL_API_KEY (Temporal Cloud): sent with every request as the SDK's `apiKey`. A secret. */
    apiKey: string | undefined;
  };
  /** Frontend port of the embedded Temporal dev server, used when no TEMPORAL_ADDRESS is set. */
  temporalDevServerPort: number;
  adminApiKey: string | undefined;
  adminPassword: string | undefined;
  authSigningKey: string | undefined;
  /** The signing key before a rotation (AUTH_SIGNING_KEY_PREVIOUS): tokens it signed are still accepted. */
  authSigningKeyPrevious: string | undefined;
  accessTokenLifetimeSeconds: number;
  refreshTokenLifetimeSeconds: number;
  permissionModel: 'structured' | 'legacy';
  connectionsEncryptionKey: string | undefined;
  /** The encryption key before a rotation (CONNECTIONS_ENCRYPTION_KEY_PREVIOUS): what it encrypted is encrypted again at start. */
  connectionsEncryptionKeyPrevious: string | undefined;
  maxBodyBytes: number;
  /**
   * How long a request's headers, and then its body, may take to arrive (REQUEST_BODY_TIMEOUT_MS); past it a
   * 408 and the connection closed. A request takes its place in a share only once its body has arrived.
   */
  requestBodyTimeoutMs: number;
  /** CIDR ranges HTTP activities may reach although loopback, link-local or private (OUTBOUND_HTTP_ALLOW_NETWORKS). */
  outboundAllowNetworks: string[];
  /** Reverse proxies whose X-Forwarded-For gives the client address (TRUSTED_PROXIES); empty: the header is ignored. */
  trustedProxies: string[];
  /**
   * Separate connection budgets, so the worker never takes the API's last connection (or the reverse);
   * Postgres ends a session idle in a transaction for longer than `idleInTransactionTimeoutMs`.
   */
  database: {
    apiPoolSize: number;
    workerPoolSize: number;
    /** Of the worker pool's connections, the plan batches' slots (WORKER_BATCH_SLOTS); the rest are the steps'. */
    batchSlots: number;
    apiStatementTimeoutMs: number;
    idleInTransactionTimeoutMs: number;
  };
  /** Per-tenant shares of what tenants share on a node or a worker (contract section 8, "Tenant shares"). */
  shares: TenantShares;
  /** How a plan's jobs are processed: jobs per batch activity, and batches in flight at once. */
  alterations: { batchSize: number; window: number; batchesPerRun: number };
  /**
   * Workflows a worker keeps in memory between their tasks (WORKER_CACHED_WORKFLOWS). Every Running instance
   * has a workflow; one kept costs about 0.27 MB, one not kept is replayed from its (short) history at its
   * next task. The SDK's default, sized to the heap limit (about 2,300 here), let 2,000 waiting instances
   * hold 570 MB.
   */
  cachedWorkflows: number;
  /**
   * The most instances an event trigger resumes inside its request (TRIGGER_INLINE_INSTANCES); a trigger that
   * reaches more records their resumption and answers, and workers resume them (src/engine/events.ts).
   */
  triggerInlineInstances: number;
  /**
   * How long finished data is kept (src/alterations/retention.ts): finished plans and their jobs
   * (PLAN_RETENTION_DAYS, 90), finished instances (INSTANCE_RETENTION_DAYS, unset: forever), audit entries
   * (AUDIT_RETENTION_DAYS, 400, at least 30); the workers sweep every RETENTION_SWEEP_SECONDS (600).
   */
  retention: { planDays: number; instanceDays: number | undefined; auditDays: number; sweepSeconds: number };
  /**
   * OpenTelemetry traces (src/tracing.ts): on when an OTLP endpoint is set. `tracesUrl` is where spans are
   * sent (OTLP over HTTP); the SDK reads the other OTEL_* settings (headers, sampler, batching) itself.
   */
  tracing: TracingSettings;
  logLevel: string;
  /** LOG_FORMAT: `pretty` lines for a person, `json` for a machine, `auto` pretty on a terminal and JSON elsewhere. */
  logFormat: 'auto' | 'pretty' | 'json';
  /**
   * The level of the one line each API request logs: `info` for machines (JSON), `debug` in pretty logs, where a
   * line per request would drown what a person reads (set by the start from the log format; `info` by default).
   */
  requestLogLevel: 'info' | 'debug';
  /** V8's old-space growth past the live heap before a full GC, in percent (src/memory.ts); 0: V8's own. */
  heapGrowingPercent: number;
  /** Where built tools are cached across data folders and clones (the Temporal CLI): $XDG_CACHE_HOME/wf-alter. */
  cacheDir: string;
  /**
   * `GET /metrics`: without credentials when `public` (METRICS_PUBLIC=true), else with `service/metrics:view`;
   * `port` (METRICS_PORT) is where a worker-only process serves it with its health probes (unset: nowhere).
   */
  metrics: { public: boolean; port: number | undefined };
}

/** TLS to a Temporal of one's own, its files read and checked at start (docs/operations.md, "Secured Temporal and Postgres"). */
export interface TemporalTls {
  /** TEMPORAL_TLS_CA: the CA(s) the server's certificate must chain to; the system's CAs when absent. */
  ca: { file: string; pem: Buffer } | undefined;
  /** TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY: this client's certificate for mTLS. The key is a secret. */
  client: { certFile: string; keyFile: string; crt: Buffer; key: Buffer } | undefined;
  /** TEMPORAL_TLS_SERVER_NAME: the name the server's certificate is checked against, if not the address's host. */
  serverName: string | undefined;
}

/** What one tenant may hold at once of a resource every tenant shares (docs/tenancy.md, "Shares"). */
export interface TenantShares {
  /** Open event streams per tenant on one API node (EVENT_STREAMS_PER_TENANT); past it, 429. */
  eventStreamsPerTenant: number;
  /** Open event streams on one API node, all tenants (EVENT_STREAMS_PER_NODE); past it, 503. */
  eventStreamsPerNode: number;
  /** API database connections one tenant's requests hold at once on a node (TENANT_API_CONNECTIONS). */
  apiConnectionsPerTenant: number;
  /** Requests one tenant has in flight at once on an API node (TENANT_API_REQUESTS); the rest wait their turn. */
  apiRequestsPerTenant: number;
  /** Requests without a valid principal in flight at once on an API node (ANONYMOUS_API_REQUESTS). */
  anonymousApiRequests: number;
  /** Outbound HTTP calls one tenant has in flight at once on a worker (TENANT_OUTBOUND_CALLS). */
  outboundCallsPerTenant: number;
  /** Outbound calls one worker makes at once, all tenants: the slots of its calls task queue (WORKER_OUTBOUND_CALL_SLOTS). */
  outboundCallSlots: number;
  /**
   * An outbound call whose connection's timeoutMs is at most this runs inside its workflow's task, as a local
   * activity of the main worker, instead of on the calls task queue (WORKER_INLINE_CALL_MAX_MS; 0: never).
   */
  inlineCallMaxMs: number;
  /** Requests to Temporal (instance starts and signals) one tenant's work has in flight at once from a process (TENANT_TEMPORAL_REQUESTS). */
  temporalRequestsPerTenant: number;
}

export class ConfigError extends Error {}

/**
 * Validates the environment once. A bad value stops the process at start with a message naming the
 * variable, instead of failing later in some request.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`Invalid configuration in the environment: ${problems}`);
  }
  const e = parsed.data;
  // A rotation replaces a key that was set: the previous key alone would sign or encrypt nothing.
  for (const [previous, current] of [
    ['AUTH_SIGNING_KEY_PREVIOUS', 'AUTH_SIGNING_KEY'],
    ['CONNECTIONS_ENCRYPTION_KEY_PREVIOUS', 'CONNECTIONS_ENCRYPTION_KEY'],
  ] as const) {
    if (e[previous] && !e[current])
      throw new ConfigError(`Invalid configuration in the environment: ${previous} is set without ${current}`);
  }
  if (e.DATABASE_URL) invalidIf(() => postgresConnection(e.DATABASE_URL!));
  return {
    port: e.PORT,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    embeddedPostgresPort: e.EMBEDDED_POSTGRES_PORT,
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      cliPath: e.TEMPORAL_CLI_PATH,
      uiPort: e.TEMPORAL_UI_PORT,
      uiUrl: e.TEMPORAL_UI_URL?.replace(/\/+$/, ''),
      tls: invalidIf(() => temporalTls(e)),
      apiKey: e.TEMPORAL_API_KEY,
    },
    temporalDevServerPort: e.TEMPORAL_DEV_SERVER_PORT,
    adminApiKey: e.ADMIN_API_KEY,
    adminPassword: e.ADMIN_PASSWORD,
    authSigningKey: e.AUTH_SIGNING_KEY,
    authSigningKeyPrevious: e.AUTH_SIGNING_KEY_PREVIOUS,
    accessTokenLifetimeSeconds: e.ACCESS_TOKEN_LIFETIME,
    refreshTokenLifetimeSeconds: e.REFRESH_TOKEN_LIFETIME,
    permissionModel: e.PERMISSION_MODEL,
    connectionsEncryptionKey: e.CONNECTIONS_ENCRYPTION_KEY,
    connectionsEncryptionKeyPrevious: e.CONNECTIONS_ENCRYPTION_KEY_PREVIOUS,
    maxBodyBytes: e.MAX_BODY_BYTES,
    requestBodyTimeoutMs: e.REQUEST_BODY_TIMEOUT_MS,
    outboundAllowNetworks: networks(e.OUTBOUND_HTTP_ALLOW_NETWORKS, 'OUTBOUND_HTTP_ALLOW_NETWORKS'),
    trustedProxies: networks(e.TRUSTED_PROXIES, 'TRUSTED_PROXIES'),
    database: {
      apiPoolSize: e.DATABASE_POOL_API,
      workerPoolSize: e.DATABASE_POOL_WORKER,
      batchSlots: batchSlots(e.WORKER_BATCH_SLOTS, e.DATABASE_POOL_WORKER),
      apiStatementTimeoutMs: e.API_STATEMENT_TIMEOUT_MS,
      idleInTransactionTimeoutMs: e.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    shares: {
      eventStreamsPerTenant: e.EVENT_STREAMS_PER_TENANT,
      eventStreamsPerNode: e.EVENT_STREAMS_PER_NODE,
      apiConnectionsPerTenant: apiConnectionsPerTenant(e.TENANT_API_CONNECTIONS, e.DATABASE_POOL_API),
      apiRequestsPerTenant: e.TENANT_API_REQUESTS,
      anonymousApiRequests: e.ANONYMOUS_API_REQUESTS,
      outboundCallsPerTenant: e.TENANT_OUTBOUND_CALLS,
      outboundCallSlots: e.WORKER_OUTBOUND_CALL_SLOTS,
      inlineCallMaxMs: e.WORKER_INLINE_CALL_MAX_MS,
      temporalRequestsPerTenant: e.TENANT_TEMPORAL_REQUESTS,
    },
    alterations: {
      batchSize: e.ALTERATION_BATCH_SIZE,
      window: e.ALTERATION_BATCH_WINDOW,
      batchesPerRun: e.ALTERATION_BATCHES_PER_RUN,
    },
    cachedWorkflows: e.WORKER_CACHED_WORKFLOWS,
    triggerInlineInstances: e.TRIGGER_INLINE_INSTANCES,
    retention: {
      planDays: e.PLAN_RETENTION_DAYS,
      instanceDays: e.INSTANCE_RETENTION_DAYS,
      auditDays: e.AUDIT_RETENTION_DAYS,
      sweepSeconds: e.RETENTION_SWEEP_SECONDS,
    },
    tracing: {
      tracesUrl: tracesUrl(e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, e.OTEL_EXPORTER_OTLP_ENDPOINT, e.OTEL_SDK_DISABLED),
      serviceName: e.OTEL_SERVICE_NAME,
    },
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    requestLogLevel: 'info',
    heapGrowingPercent: e.HEAP_GROWING_PERCENT,
    cacheDir: path.join(e.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'wf-alter'),
    metrics: { public: e.METRICS_PUBLIC === 'true', port: e.METRICS_PORT },
  };
}

function networks(value: string, setting: string): string[] {
  return invalidIf(() => parseNetworks(value, setting));
}

/** `read()`, its error (a sentence naming the setting) as a ConfigError. */
function invalidIf<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`Invalid configuration in the environment: ${(err as Error).message}`);
  }
}

/**
 * TEMPORAL_TLS and its files. Any of them (or TEMPORAL_API_KEY, which Temporal Cloud takes over TLS only)
 * turns TLS on; TEMPORAL_TLS=false with them is a contradiction, not a choice. They secure the connection to
 * TEMPORAL_ADDRESS: without one the service runs its own dev server on loopback, which has no TLS.
 */
function temporalTls(e: z.infer<typeof ConfigSchema>): TemporalTls | undefined {
  const named = (
    [
      ['TEMPORAL_TLS_CA', e.TEMPORAL_TLS_CA],
      ['TEMPORAL_TLS_CERT', e.TEMPORAL_TLS_CERT],
      ['TEMPORAL_TLS_KEY', e.TEMPORAL_TLS_KEY],
      ['TEMPORAL_TLS_SERVER_NAME', e.TEMPORAL_TLS_SERVER_NAME],
    ] as const
  ).filter(([, v]) => v !== undefined);
  const settings = [...named.map(([k]) => k), ...(e.TEMPORAL_API_KEY ? ['TEMPORAL_API_KEY'] : [])];
  const on = e.TEMPORAL_TLS === 'true' || settings.length > 0;
  if (!on) return undefined;
  const set = (names: string[]) => `${names.join(', ')} ${names.length > 1 ? 'are' : 'is'} set`;
  if (!e.TEMPORAL_ADDRESS)
    throw new Error(
      `${set(e.TEMPORAL_TLS === 'true' ? ['TEMPORAL_TLS', ...settings] : settings)} but TEMPORAL_ADDRESS is not: ` +
        'TLS and API keys secure the connection to a Temporal of your own; without TEMPORAL_ADDRESS the service runs its embedded dev server on loopback, without TLS. Set TEMPORAL_ADDRESS, or unset them',
    );
  if (e.TEMPORAL_TLS === 'false')
    throw new Error(
      `TEMPORAL_TLS is false but ${set(settings)}, which only work over TLS` +
        (e.TEMPORAL_API_KEY ? ' (an API key must not travel unencrypted)' : '') +
        ': unset TEMPORAL_TLS=false or them',
    );
  if ((e.TEMPORAL_TLS_CERT === undefined) !== (e.TEMPORAL_TLS_KEY === undefined))
    throw new Error(
      e.TEMPORAL_TLS_CERT
        ? 'TEMPORAL_TLS_CERT is set without TEMPORAL_TLS_KEY: a client certificate (mTLS) needs its private key'
        : 'TEMPORAL_TLS_KEY is set without TEMPORAL_TLS_CERT: a client key (mTLS) needs its certificate',
    );
  const ca = e.TEMPORAL_TLS_CA
    ? { file: e.TEMPORAL_TLS_CA, pem: readCertificates('TEMPORAL_TLS_CA', e.TEMPORAL_TLS_CA) }
    : undefined;
  let client: TemporalTls['client'];
  if (e.TEMPORAL_TLS_CERT && e.TEMPORAL_TLS_KEY) {
    const crt = readCertificates('TEMPORAL_TLS_CERT', e.TEMPORAL_TLS_CERT);
    const key = readPrivateKey('TEMPORAL_TLS_KEY', e.TEMPORAL_TLS_KEY);
    assertKeyMatches(
      { setting: 'TEMPORAL_TLS_CERT', file: e.TEMPORAL_TLS_CERT, pem: crt },
      { setting: 'TEMPORAL_TLS_KEY', file: e.TEMPORAL_TLS_KEY, pem: key },
    );
    client = { certFile: e.TEMPORAL_TLS_CERT, keyFile: e.TEMPORAL_TLS_KEY, crt, key };
  }
  return { ca, client, serverName: e.TEMPORAL_TLS_SERVER_NAME };
}

/**
 * Where spans go, as the OTLP specification reads the settings: the traces endpoint as given, else
 * `v1/traces` under the general endpoint; none (tracing off) without either or with OTEL_SDK_DISABLED=true.
 */
function tracesUrl(traces: string | undefined, general: string | undefined, disabled: string | undefined) {
  if (disabled?.trim().toLowerCase() === 'true') return undefined;
  if (traces) return traces;
  if (!general) return undefined;
  return new URL('v1/traces', general.endsWith('/') ? general : `${general}/`).toString();
}

/**
 * WORKER_BATCH_SLOTS, by default the cores of this machine (at least 2), at most half the worker pool: a
 * batch keeps a core of the worker and of Postgres busy, so more at once only makes each slower
 * (bench/README.md: 2 slots on 2 cores gave another tenant's plan 1.2–1.7x its time alone beside a big plan,
 * 3 slots 2.0x, 4 slots 2.1–2.9x). A value set explicitly must leave at least 4 of DATABASE_POOL_WORKER to
 * instance steps and plan generation.
 */
function batchSlots(configured: number | undefined, pool: number): number {
  if (configured === undefined)
    return Math.max(1, Math.min(Math.max(2, os.availableParallelism()), Math.floor(pool / 2)));
  if (configured > pool - RESERVED_FOR_STEPS) {
    throw new ConfigError(
      `Invalid configuration in the environment: WORKER_BATCH_SLOTS (${configured}) must leave at least ${RESERVED_FOR_STEPS} of DATABASE_POOL_WORKER (${pool}) to instance steps and plan generation`,
    );
  }
  return configured;
}

/** Worker pool connections kept from plan batches: steps (2) and plan generation and completion (2). */
const RESERVED_FOR_STEPS = 4;

/** TENANT_API_CONNECTIONS, by default half the API pool (at least one); never more than the pool. */
function apiConnectionsPerTenant(configured: number | undefined, pool: number): number {
  if (configured !== undefined && configured > pool) {
    throw new ConfigError(
      `Invalid configuration in the environment: TENANT_API_CONNECTIONS (${configured}) is larger than DATABASE_POOL_API (${pool})`,
    );
  }
  return configured ?? Math.max(1, Math.floor(pool / 2));
}
