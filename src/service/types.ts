import type { ServerType } from '@hono/node-server';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Client } from '@temporalio/client';
import type { Worker, WorkerOptions } from '@temporalio/worker';
import type pg from 'pg';
import type { createApp } from '../api/app.js';
import type { TokenSettings } from '../auth/tokens.js';
import type { Config } from '../config.js';
import type { DefinitionCache } from '../engine/definitions.js';
import type { Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { TemporalLink } from '../temporal/link.js';
import type { StopRegistry } from '../lifecycle.js';
import type { Clock } from '../vocabulary/clock.js';
import type { WorkerRole } from './workers.js';

export type { StopRegistry } from '../lifecycle.js';

/** What one process runs: both (`npm start`), only the API, or only a worker (the production shape). */
export type Role = 'all' | 'api' | 'worker';

/**
 * What differs between `npm start`, the test harness and the benchmark. Everything else comes from the
 * `Config`, so the three run the same wiring.
 */
export interface ServiceOverrides {
  role?: Role;
  logger?: Logger;
  /** The logger the Temporal SDK's own lines go to (installed once per process); `logger` by default. */
  runtimeLogger?: Logger;
  /** Where stops are registered; without it the service keeps its own, run by `service.stop()`. */
  stops?: StopRegistry;
  /** A dependency the service started (embedded Postgres, dev server) or its worker died under it. */
  onLost?: (why: string) => void;
  /** Start the worker now (default) or later with `service.startWorker()`. */
  startWorker?: boolean;
  /** Listen on `config.port` (default) or only serve in process through `service.app.request()`. */
  listen?: boolean;
  /** A pre-built workflow bundle; else the worker finds or builds its own (src/temporal/worker.ts). */
  workflowBundlePath?: string | undefined;
  /** Extra worker options (tests shorten the shutdown grace time; the bench adds interceptors). */
  workerOptions?: Partial<WorkerOptions>;
  /** The clock tokens are issued and checked with (tests of expiry move it). */
  clock?: Clock;
  /** Called with each pool as it is made (the bench counts statements). */
  onPool?: (pool: pg.Pool, which: 'api' | 'worker') => void;
  /**
   * false: plan jobs record no before-image, so a revert finds nothing to restore. Only the bench sets it,
   * to measure what recording them costs; there is no setting for it.
   */
  recordUndo?: boolean;
  /** false: no audit trail. Only the bench sets it, to measure what the trail costs; there is no setting for it. */
  auditTrail?: boolean;
  /** How long a stopping worker waits for its eager starts in flight (10 s; a test shortens it). */
  eagerStartsStopWaitMs?: number;
  /** How often event streams read their plan when nothing wakes them (a test turns polling off with it). */
  planEventPollMs?: { min: number; max: number };
  /** Spans go here (tests: an in-memory exporter), and tracing is on whatever the OTEL_* settings say. */
  spanProcessor?: SpanProcessor;
  /**
   * Start Temporal before the API answers (default), or, when its dev server must first be built with Go,
   * after: `npm start` on a new machine serves the API, its docs and the stored data while it builds.
   */
  temporalInBackground?: boolean;
}

export interface Service {
  readonly config: Config;
  readonly role: Role;
  readonly logger: Logger;
  /** The API's pool, or the worker's in a worker-only process. */
  readonly pool: pg.Pool;
  readonly apiPool: pg.Pool | undefined;
  readonly workerPool: pg.Pool | undefined;
  readonly databaseUrl: string;
  /** Temporal's address once it is up ('' before). */
  readonly temporalAddress: string;
  /** The Temporal client; throws while Temporal is not up yet (see `temporal`). */
  readonly client: Client;
  /** Temporal, which may come up after the API (`temporalInBackground`). */
  readonly temporal: TemporalLink;
  /** Resolves once Temporal is up and, where this process runs one, the worker started. */
  readonly engineReady: Promise<void>;
  readonly definitions: DefinitionCache;
  readonly tokens: TokenSettings;
  /** The HTTP app (API roles): served on `config.port`, or driven in process with `app.request()`. */
  readonly app: ReturnType<typeof createApp> | undefined;
  readonly server: ServerType | undefined;
  /** This service's metrics (`GET /metrics`). */
  readonly metrics: ServiceMetrics;
  /** A worker-only process's METRICS_PORT listener (`/metrics`, `/health/live`, `/health/ready`). */
  readonly metricsServer: ServerType | undefined;
  /** What was started here because nothing was configured: shown in the start banner. */
  /**
   * The embedded stores: Postgres's data folder, the dev server's address once it is up; whether its binary is being
   * built (`temporalBuilding`) or it is starting (`temporalStarting`) in the background while the API answers.
   */
  readonly embedded: {
    postgresDataDir?: string;
    temporal?: string;
    temporalBuilding?: boolean;
    temporalStarting?: boolean;
  };
  /** A bootstrap admin API key generated by this start (shown once), when none existed. */
  readonly generatedKey: string | undefined;
  /** The console user `admin`'s password this start generated (shown once), when there was no user at all. */
  readonly generatedPassword: string | undefined;
  readonly worker: Worker | undefined;
  /** The worker side (its Temporal workers, relay and drain), running or not: set once Temporal is up, where the process runs one. */
  readonly workers: WorkerRole | undefined;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  /** Stops what this service started, in reverse order (only when it keeps its own stops). */
  stop(): Promise<void>;
}
