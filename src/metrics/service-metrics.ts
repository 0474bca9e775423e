import { governedPlanCounts, PLAN_TABLE } from '../alterations/plan-store/index.js';
import type pg from 'pg';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PlanMetrics } from '../alterations/processing.js';
import type { Purged, RetentionObserver } from '../alterations/retention.js';
import type { CallObserver, CallOutcome } from '../connections/http.js';
import { scrapeTemporalSdk } from './temporal-scrape.js';

/**
 * The service's database pools (docs/tenancy.md, Sizing): the API's, the worker's, the calls',
 * and the one connection of a worker-only process's METRICS_PORT listener.
 */
export type PoolName = 'api' | 'worker' | 'calls' | 'probes';

/**
 * The operator's metrics of one service (one process's API and worker), in a registry of its own: created
 * with the service and handed down to the HTTP app, the activities and the outbound calls, never prom-client's
 * global registry (a test process runs several services). Every label is bounded and names no tenant, plan or
 * instance: metrics are per node and across tenants (docs/operations.md, "Metrics and health").
 */
export interface ServiceMetrics extends PlanMetrics, CallObserver, RetentionObserver {
  /** The Prometheus text format's content type (version 0.0.4), which the SDK's exporter writes too. */
  readonly contentType: string;
  /** One HTTP request answered: its route template (`/alterations/{planId}`, `unmatched`), never its path. */
  requestFinished(route: string, method: string, status: number, seconds: number): void;
  /** Reports the pool's connections (total, idle, waiting) at every scrape. */
  watchPool(name: PoolName, pool: pg.Pool): void;
  /** Reports the event streams open on this node at every scrape (the app's share counter). */
  watchEventStreams(open: () => number): void;
  /**
   * Reports the engine's queues at every scrape, read through this pool: the instance changes the outbox
   * relay has not told their workflows yet, and the event resumptions triggers recorded that no worker ran yet.
   */
  watchEngineBacklog(pool: pg.Pool): void;
  /** Read the plans waiting on governance (an approval, a maintenance window) through this pool at each scrape. */
  watchGovernedPlans(pool: pg.Pool): void;
  /** Reports the outbound calls waiting on this worker for a place of their tenant's share at every scrape. */
  watchCallWaiters(waiting: () => number): void;
  /** The workflow of a waiting call was signalled that a place freed (`callPlaceFreed`), with what came of it. */
  callWoken(outcome: CallWakeOutcome): void;
  /** One audit entry written by this node (src/api/audit-trail.ts). */
  auditEntryWritten(): void;
  /** The exposition: this registry's metrics, then the Temporal SDK's (read from its exporter on loopback). */
  scrape(): Promise<string>;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const CALL_OUTCOMES: CallOutcome[] = ['success', 'http_error', 'refused', 'timeout', 'failed'];
/** The job statuses a plan batch writes (a cancelled job is not written by a batch: it is read as Cancelled). */
const FINISHED_JOB_STATUSES = ['Completed', 'Failed', 'Skipped'] as const;
const VERIFICATION_RESULTS = ['Verified', 'Unverified'] as const;

/** Seconds; an event stream's request ends when its stream opens, so long streams do not skew these. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds; a call may take up to its connection's timeoutMs (at most 300 s). */
const CALL_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** Both queues in one statement; counts are exact (the queues drain to empty as the workers keep up). */
const ENGINE_BACKLOG_SQL = `
  SELECT q.queue, q.n::float8 AS n, COALESCE(extract(epoch FROM clock_timestamp() - q.oldest), 0)::float8 AS oldest
    FROM (SELECT 'outbox' AS queue, count(*) AS n, min(enqueued_at) AS oldest FROM instance_outbox
          UNION ALL
          SELECT 'resumptions', count(*), min(triggered_at) FROM instance_resumptions) q`;

/**
 * The tables that grow with use: their rows (counted when small, else the planner's estimate) and bytes (with
 * indexes and TOAST). Their names are written into a count's SQL: identifiers of our own, never input.
 */
const MEASURED_TABLES = [
  'workflow_instances',
  PLAN_TABLE,
  'alteration_jobs',
  'audit_entries',
  'journal_entries',
  'activity_records',
];
/** A table up to this size (indexes and TOAST included) has its rows counted, not estimated. */
const COUNTED_UP_TO_BYTES = 16 * 1024 * 1024;
/** A partitioned table counts its partitions. */
const TABLE_SIZES_SQL = `
  SELECT t.name, COALESCE(sum(greatest(c.reltuples, 0)), 0)::float8 AS rows,
         COALESCE(sum(pg_total_relation_size(c.oid)), 0)::float8 AS bytes
    FROM unnest($1::text[]) AS t(name)
    JOIN pg_class p ON p.relname = t.name AND p.relnamespace = current_schema()::regnamespace
    CROSS JOIN LATERAL (SELECT p.oid UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = p.oid) AS x(oid)
    JOIN pg_class c ON c.oid = x.oid
   GROUP BY t.name`;

/** What came of waking a waiting call's workflow: signalled, gone (it ended), or the signal failed (Temporal away). */
export type CallWakeOutcome = 'signalled' | 'gone' | 'failed';
const CALL_WAKE_OUTCOMES: readonly CallWakeOutcome[] = ['signalled', 'gone', 'failed'];

export function createServiceMetrics(options: { temporalMetricsUrl?: string | undefined } = {}): ServiceMetrics {
  const registry = new Registry();
  // process_cpu_…, process_resident_memory_bytes, nodejs_eventloop_lag_…, nodejs_heap_…, nodejs_gc_…
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  /** A counter by one label, each of whose `values` is reported from 0 (a series that exists before its first event). */
  const countedFromZero = <L extends string>(name: string, help: string, label: L, values: readonly string[]) => {
    const counter = new Counter<L>({ name, help, labelNames: [label], registers });
    for (const value of values) counter.inc({ [label]: value } as Partial<Record<L, string>>, 0);
    return counter;
  };
  /** A gauge that sums, at each scrape, what the sources watched through it say (one per server or worker). */
  const summedAtScrape = (name: string, help: string) => {
    const sources: (() => number)[] = [];
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(sources.reduce((sum, read) => sum + read(), 0));
      },
    });
    return sources;
  };

  const requests = new Counter({
    name: 'wfa_http_requests_total',
    help: 'HTTP requests answered, by route template (never the raw path; unknown paths are "unmatched"), method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
  });
  const requestSeconds = new Histogram({
    name: 'wfa_http_request_duration_seconds',
    help: 'Time to answer an HTTP request (until its response starts: an event stream counts until it opens), by route template and method',
    labelNames: ['route', 'method'] as const,
    buckets: REQUEST_BUCKETS,
    registers,
  });
  const jobs = countedFromZero(
    'wfa_plan_jobs_total',
    "Plan jobs finished by this worker's plan batches, by job status name",
    'status',
    FINISHED_JOB_STATUSES,
  );
  const verifications = countedFromZero(
    'wfa_plan_job_verifications_total',
    "Completed jobs of plans with verify that this worker's checks found Verified or Unverified, by result",
    'result',
    VERIFICATION_RESULTS,
  );
  const batches = new Gauge({
    name: 'wfa_plan_batches_in_flight',
    help: 'Plan batch activities running on this worker now (a throttled batch waiting for its start in its slot included)',
    registers,
  });
  batches.set(0);

  const streamSources = summedAtScrape(
    'wfa_event_streams_open',
    'Plan event streams (GET /alterations/{planId}/events) open on this API node, all tenants together',
  );

  const pools: [PoolName, pg.Pool][] = [];
  new Gauge({
    name: 'wfa_db_pool_connections',
    help: 'Connections of each database pool of this process, read at scrape time: total (open), idle, and waiting (requests queued for one)',
    labelNames: ['pool', 'state'] as const,
    registers,
    collect() {
      this.reset();
      for (const [name, pool] of pools) {
        this.set({ pool: name, state: 'total' }, pool.totalCount);
        this.set({ pool: name, state: 'idle' }, pool.idleCount);
        this.set({ pool: name, state: 'waiting' }, pool.waitingCount);
      }
    },
  });

  // Database-wide (every tenant, every worker): the same value from every process that reports it.
  const backlogRows = new Gauge({
    name: 'wfa_engine_backlog_rows',
    help: 'Rows waiting in the engine queues of the whole database, read at scrape time: outbox (instance changes not yet told to their workflows), resumptions (event resumptions recorded by triggers and not yet run)',
    labelNames: ['queue'] as const,
    registers,
  });
  const backlogAge = new Gauge({
    name: 'wfa_engine_backlog_oldest_seconds',
    help: 'Age of the oldest row waiting in each engine queue (0 when it is empty), read at scrape time',
    labelNames: ['queue'] as const,
    registers,
  });
  let backlogPool: pg.Pool | undefined;
  const readBacklog = async () => {
    if (!backlogPool) return;
    try {
      const { rows } = await backlogPool.query<{ queue: 'outbox' | 'resumptions'; n: number; oldest: number }>(
        ENGINE_BACKLOG_SQL,
      );
      for (const r of rows) {
        backlogRows.set({ queue: r.queue }, r.n);
        backlogAge.set({ queue: r.queue }, r.oldest);
      }
    } catch {
      // Postgres unreachable or slow: no samples rather than stale ones (GET /health/ready names the database).
      backlogRows.reset();
      backlogAge.reset();
    }
  };

  const tableRows = new Gauge({
    name: 'wfa_table_rows',
    help: "Rows of each table that grows with use, read at scrape time: counted up to 16 MiB of table, the planner's estimate (as of its last ANALYZE) past that",
    labelNames: ['table'] as const,
    registers,
  });
  const tableBytes = new Gauge({
    name: 'wfa_table_bytes',
    help: 'Bytes of each table that grows with use, its indexes and TOAST included, read at scrape time',
    labelNames: ['table'] as const,
    registers,
  });
  const readTables = async () => {
    if (!backlogPool) return;
    try {
      const { rows } = await backlogPool.query<{ name: string; rows: number; bytes: number }>(TABLE_SIZES_SQL, [
        MEASURED_TABLES,
      ]);
      for (const r of rows) {
        // A small table is counted (a few ms): the planner's estimate is 0 until its first ANALYZE.
        const counted =
          r.bytes <= COUNTED_UP_TO_BYTES
            ? Number((await backlogPool.query<{ n: string }>(`SELECT count(*) AS n FROM "${r.name}"`)).rows[0]!.n)
            : r.rows;
        tableRows.set({ table: r.name }, counted);
        tableBytes.set({ table: r.name }, r.bytes);
      }
    } catch {
      tableRows.reset();
      tableBytes.reset();
    }
  };
  const PURGED: (keyof Purged)[] = ['plans', 'jobs', 'instances', 'auditEntries'];
  const purgedTotal = countedFromZero(
    'wfa_retention_purged_total',
    "Rows this worker's retention sweeps removed past their days, by kind: plans, jobs, instances, auditEntries",
    'kind',
    PURGED,
  );
  const lastSweep = new Gauge({
    name: 'wfa_retention_last_sweep_timestamp_seconds',
    help: "When this worker's last retention sweep ended (Unix time; absent before its first)",
    registers,
  });
  const lastSweepPurged = new Gauge({
    name: 'wfa_retention_last_sweep_purged',
    help: "Rows this worker's last retention sweep removed, by kind",
    labelNames: ['kind'] as const,
    registers,
  });
  const auditEntries = new Counter({
    name: 'wfa_audit_entries_total',
    help: 'Audit trail entries this node wrote (one per state-changing request, sign-in and refusal)',
    registers,
  });

  const awaitingApproval = new Gauge({
    name: 'wfa_plans_awaiting_approval',
    help: 'Plans awaiting approval (status AwaitingApproval), database-wide, counted at scrape time',
    registers,
  });
  const pausedBySchedule = new Gauge({
    name: 'wfa_plans_paused_by_schedule',
    help: 'Plans paused until their maintenance window opens (pauseReason "schedule"), database-wide, at scrape time',
    registers,
  });
  let governancePool: pg.Pool | undefined;
  const readGovernance = async () => {
    if (!governancePool) return;
    try {
      const counts = await governedPlanCounts(governancePool);
      awaitingApproval.set(counts.awaiting);
      pausedBySchedule.set(counts.scheduled);
    } catch {
      awaitingApproval.reset();
      pausedBySchedule.reset();
    }
  };

  const calls = countedFromZero(
    'wfa_outbound_calls_total',
    'Outbound HTTP calls of Send HTTP Request made by this worker, by outcome (success, http_error, refused, timeout, failed)',
    'outcome',
    CALL_OUTCOMES,
  );
  const callSeconds = new Histogram({
    name: 'wfa_outbound_call_duration_seconds',
    help: 'Duration of the outbound calls that went out (all outcomes but refused), by outcome',
    labelNames: ['outcome'] as const,
    buckets: CALL_BUCKETS,
    registers,
  });

  const callWaiterSources = summedAtScrape(
    'wfa_outbound_calls_waiting',
    "Outbound calls turned back over their tenant's share (TENANT_OUTBOUND_CALLS) whose workflows wait on this worker to be woken when a place frees, at scrape time",
  );
  const callWakes = countedFromZero(
    'wfa_outbound_call_wakes_total',
    'Workflows of waiting outbound calls this worker woke (callPlaceFreed), by outcome: signalled, gone (the workflow had ended), failed (Temporal did not take the signal; the call comes back on its timer)',
    'outcome',
    CALL_WAKE_OUTCOMES,
  );

  return {
    contentType: registry.contentType,
    requestFinished(route, method, status, seconds) {
      const m = METHODS.has(method) ? method : 'other';
      requests.inc({ route, method: m, status: String(status) });
      requestSeconds.observe({ route, method: m }, seconds);
    },
    jobsFinished(completed, failed, skipped = 0) {
      if (completed > 0) jobs.inc({ status: 'Completed' }, completed);
      if (failed > 0) jobs.inc({ status: 'Failed' }, failed);
      if (skipped > 0) jobs.inc({ status: 'Skipped' }, skipped);
    },
    jobsVerified(verified, unverified) {
      if (verified > 0) verifications.inc({ result: 'Verified' }, verified);
      if (unverified > 0) verifications.inc({ result: 'Unverified' }, unverified);
    },
    batchStarted() {
      batches.inc();
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        batches.dec();
      };
    },
    callFinished(outcome, seconds) {
      calls.inc({ outcome });
      if (seconds !== undefined) callSeconds.observe({ outcome }, seconds);
    },
    watchPool(name, pool) {
      pools.push([name, pool]);
    },
    watchEventStreams(open) {
      streamSources.push(open);
    },
    watchEngineBacklog(pool) {
      backlogPool = pool;
    },
    watchGovernedPlans(pool) {
      governancePool = pool;
    },
    watchCallWaiters(waiting) {
      callWaiterSources.push(waiting);
    },
    callWoken(outcome) {
      callWakes.inc({ outcome });
    },
    auditEntryWritten() {
      auditEntries.inc();
    },
    retentionSwept(purged) {
      for (const kind of PURGED) {
        if (purged[kind] > 0) purgedTotal.inc({ kind }, purged[kind]);
        lastSweepPurged.set({ kind }, purged[kind]);
      }
      lastSweep.set(Date.now() / 1000);
    },
    async scrape() {
      await Promise.all([readBacklog(), readGovernance(), readTables()]);
      const own = await registry.metrics();
      if (!options.temporalMetricsUrl) return own;
      return own + (await scrapeTemporalSdk(options.temporalMetricsUrl));
    },
  };
}
