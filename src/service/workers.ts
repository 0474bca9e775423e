import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { Worker, WorkerOptions } from '@temporalio/worker';
import type pg from 'pg';
import type { Config } from '../config.js';
import type { ConfigCipher } from '../connections/cipher.js';
import { createPool } from '../db/pool.js';
import type { PostgresConnection } from '../db/postgres-connection.js';
import type { DefinitionCache } from '../engine/definitions.js';
import { retentionSweeper } from '../alterations/retention.js';
import { ResumptionDrain } from '../engine/resumption-drain.js';
import type { Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import { PlaceWaiters, TenantCounter } from '../shares.js';
import { OutboxRelay } from '../temporal/outbox-relay.js';
import { callPlaceFreed } from '../../workflows/index.js';
import { createBatchWorker, createCallsWorker, createWorker } from '../temporal/worker.js';
import { type Tracing, withTracing } from '../tracing.js';
import type { TemporalParts } from './temporal.js';
import type { StopRegistry } from '../lifecycle.js';

/**
 * How the worker pool's connections (after the batches' slots) are split between the main worker's regular
 * and local activities: each activity holds at most one connection. Local: instance steps (since the
 * `instance-local-steps` patch) and plan generation and completion. Regular: plan steering (pause, control)
 * and the steps of instance workflows recorded before that patch: a quarter, at least 2.
 */
function mainWorkerSlots(workerPoolSize: number, batchSlots: number) {
  const steady = workerPoolSize - batchSlots;
  const regular = Math.max(2, Math.floor(steady / 4));
  return { regular, local: Math.max(2, steady - regular) };
}

/** Calls that may wait inside a worker for their tenant's turn at once: a quarter of its call slots, at least 1. */
const waitingCallSlots = (slots: number) => Math.max(1, Math.floor(slots / 4));

/** The SDK's workflow task slots of a worker by default (maxConcurrentWorkflowTaskExecutions). */
const SDK_WORKFLOW_TASK_SLOTS = 40;

/** Connections of the calls worker's own pool: each call reads what to call in a few short statements. */
const CALLS_POOL_SIZE = 4;

/**
 * How long a stop waits for the eager starts in flight: a start answers within Temporal's request timeout, but one
 * to an unreachable Temporal must not keep the workers from stopping (src/lifecycle.ts gives all stops 30 s).
 */
const EAGER_STARTS_STOP_WAIT_MS = 10_000;

export interface WorkerRoleDeps {
  config: Config;
  logger: Logger;
  stops: StopRegistry;
  postgres: PostgresConnection;
  workerPool: pg.Pool;
  /** Where scrapes read the engine's queues: the API's pool, or a worker-only process's probes pool. */
  backlogPool: pg.Pool | undefined;
  temporal: TemporalParts;
  definitions: DefinitionCache;
  cipher: ConfigCipher;
  metrics: ServiceMetrics;
  tracing: Tracing | undefined;
  workflowBundlePath?: string | undefined;
  workerOptions?: Partial<WorkerOptions> | undefined;
  recordUndo?: boolean | undefined;
  /** How long a stop waits for the eager starts in flight (EAGER_STARTS_STOP_WAIT_MS; a test shortens it). */
  eagerStartsStopWaitMs?: number | undefined;
  /** A worker stopped with an error: the owner decides (main stops the process, exit 1). */
  onLost?: ((why: string) => void) | undefined;
}

/** The worker side of a process: its Temporal workers, the outbox relay, the resumption drain and retention. */
export interface WorkerRole {
  /** Starts the workers (after any start or stop asked for before; a second start fails: already running). */
  start(): Promise<void>;
  /**
   * Stops them, after any start or stop asked for before: the relay and the drain first, then the eager starts in
   * flight (for at most EAGER_STARTS_STOP_WAIT_MS), then the workers, whose tasks in flight end.
   */
  stop(): Promise<void>;
  /** Every Temporal worker of the process polls (`GET /health/ready`). */
  running(): boolean;
  /** The main worker, while it runs. */
  readonly main: Worker | undefined;
  /**
   * Runs `start` with a client on the main worker's own connection while that worker runs (undefined
   * otherwise): a workflow of its task queue started through it with `requestEagerStart` gets its first task
   * back with the start, for this process's worker to run at once, without a round through Temporal's matching.
   * The worker stops only after such starts have returned: a task handed back to a worker that was shutting
   * down would wait out its workflow task timeout.
   */
  withEagerClient<T>(start: (eager: Client | undefined) => Promise<T>): Promise<T>;
}

/**
 * Builds the worker side: the calls' own pool (a call holds a slot of the calls worker for as long as its
 * endpoint takes, and must never wait for a connection batches and steps hold), the per-tenant share of
 * outbound calls, the relay that tells instances' workflows what committed (tenants in turn, a share of
 * the requests to Temporal each), the drain of recorded event resumptions, and the three workers (main:
 * workflows and steps; batches; calls), started and stopped together.
 */
export function createWorkerRole(d: WorkerRoleDeps): WorkerRole {
  const { config, logger } = d;
  const callsPool = createPool(d.postgres, {
    max: CALLS_POOL_SIZE,
    idleInTransactionTimeoutMs: config.database.idleInTransactionTimeoutMs,
    applicationName: 'workflow-alterations-calls',
  });
  d.stops.add('calls database pool', () => callsPool.end());
  d.metrics.watchPool('calls', callsPool);
  // A quarter of the call slots at most wait for their tenant's turn (activities/calls.ts, SHARE_WAIT_MS): anyone's
  // while free, taken back for a tenant under its share of them from the tenant furthest past it (`TenantCounter.take`).
  const outboundCalls = new TenantCounter(
    config.shares.outboundCallsPerTenant,
    config.shares.outboundCallSlots,
    waitingCallSlots(config.shares.outboundCallSlots),
  );
  // On the worker's own connection: a new instance's workflow starts eagerly (its first task comes back to this
  // process's worker with the start), and the requests go through the SDK's native client.
  const client = new Client({
    connection: d.temporal.nativeConnection,
    namespace: config.temporal.namespace,
    interceptors: d.tracing?.clientInterceptors,
  });
  // A call turned back waits for a place to free on this worker: the freed place wakes its workflow.
  const callWaiters = new PlaceWaiters(outboundCalls, (workflowId) =>
    client.workflow
      .getHandle(workflowId)
      .signal(callPlaceFreed)
      .then(
        () => {
          d.metrics.callWoken('signalled');
          return true;
        },
        (err: unknown) => {
          // Its instance ended meanwhile: its place in line goes to the next. Temporal away: the workflow's own
          // timer brings the call back.
          if (err instanceof WorkflowNotFoundError) {
            d.metrics.callWoken('gone');
            return false;
          }
          d.metrics.callWoken('failed');
          logger.debug({ err, workflowId }, 'a workflow waiting for an outbound call place could not be woken');
          return true;
        },
      ),
  );
  d.metrics.watchCallWaiters(() => callWaiters.size);
  d.stops.add('outbound call waiters', async () => callWaiters.stop());
  const relay = new OutboxRelay({
    pool: d.workerPool,
    client,
    eager: true,
    taskQueue: config.temporal.taskQueue,
    logger,
    searchAttributes: d.temporal.searchAttributes,
    perTenant: config.shares.temporalRequestsPerTenant,
  });
  const resumptions = new ResumptionDrain({ pool: d.workerPool, definitions: d.definitions, logger });
  const retention = retentionSweeper(d.workerPool, config.retention, logger, d.metrics);
  if (d.backlogPool) d.metrics.watchEngineBacklog(d.backlogPool);

  let workers: Worker[] = [];
  let runs: Promise<void>[] = [];
  let stopping = false;
  // Eager starts in flight through `client` (withEagerClient) to the workers of this start, and what waits for them
  // to end: counted per start, so that a start left in flight by an earlier set of workers holds up no later stop.
  let eager: { starts: number; ended?: (() => void) | undefined } = { starts: 0 };
  const withEagerClient = async <T>(begin: (eager: Client | undefined) => Promise<T>): Promise<T> => {
    if (stopping || workers[0]?.getState() !== 'RUNNING') return begin(undefined);
    const these = eager;
    these.starts++;
    try {
      return await begin(client);
    } finally {
      if (--these.starts === 0) these.ended?.();
    }
  };
  const startWorkers = async () => {
    if (workers.length) throw new Error('the worker is already running');
    workers = await createWorkers(d, callsPool, outboundCalls, callWaiters);
    eager = { starts: 0 };
    stopping = false;
    runs = workers.map((w) => w.run());
    relay.start();
    resumptions.start();
    retention.start();
    for (const run of runs) {
      run.catch((err: unknown) => {
        if (stopping) return;
        logger.fatal({ err }, 'worker stopped with an error');
        d.onLost?.('worker failed');
      });
    }
  };
  const stopWorkers = async () => {
    if (!workers.length) return;
    stopping = true;
    const these = eager;
    // A start that never returns (Temporal unreachable) holds the stop no longer than the bound.
    let bound: NodeJS.Timeout | undefined;
    const eagerEnded =
      these.starts === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            bound = setTimeout(() => {
              logger.warn(
                { eagerStarts: these.starts },
                'the worker stops with workflow starts still in flight; their first tasks go to another worker after their timeout',
              );
              resolve();
            }, d.eagerStartsStopWaitMs ?? EAGER_STARTS_STOP_WAIT_MS);
            these.ended = () => {
              clearTimeout(bound);
              resolve();
            };
          });
    try {
      await Promise.all([relay.stop(), resumptions.stop(), retention.stop(), eagerEnded]);
    } finally {
      clearTimeout(bound);
      these.ended = undefined;
    }
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    await Promise.all(runs.map((r) => r.catch(() => undefined)));
    workers = [];
    runs = [];
  };
  // Starts and stops run one after another, in the order they were asked for: a stop asked for during a start
  // stops what that start started, and a second stop asked for during a stop finds nothing left to stop.
  let transition: Promise<void> = Promise.resolve();
  const serially = (step: () => Promise<void>): Promise<void> => {
    const done = transition.then(step);
    transition = done.catch(() => undefined);
    return done;
  };
  const start = () => serially(startWorkers);
  const stop = () => serially(stopWorkers);
  return {
    start,
    stop,
    running: () => workers.length > 0 && workers.every((w) => w.getState() === 'RUNNING'),
    get main() {
      return workers[0];
    },
    withEagerClient,
  };
}

/** The main, batches and calls workers, each with its slots (src/temporal/worker.ts). */
async function createWorkers(
  d: WorkerRoleDeps,
  callsPool: pg.Pool,
  calls: TenantCounter,
  waiters: PlaceWaiters,
): Promise<Worker[]> {
  const { config } = d;
  const engine = {
    definitions: d.definitions,
    logger: d.logger,
    cipher: d.cipher,
    outbound: { allowNetworks: config.outboundAllowNetworks },
    callMetrics: d.metrics,
  };
  const { inlineCallMaxMs, outboundCallSlots } = config.shares;
  // Steps and batches: the worker pool, and plan batches' dispatches outside the Temporal request share.
  const activityDeps = {
    ...engine,
    pool: d.workerPool,
    planMetrics: d.metrics,
    inlineCallMaxMs,
    ...(d.recordUndo === false ? { recordUndo: false } : {}),
  };
  const callDeps = { ...engine, pool: callsPool, calls, waiters };
  const where = {
    connection: d.temporal.nativeConnection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
  };
  const options = withTracing(d.workerOptions, d.tracing);
  const { workerPoolSize, batchSlots } = config.database;
  const slots = mainWorkerSlots(workerPoolSize, batchSlots);
  // Calls made inline (a connection that answers within WORKER_INLINE_CALL_MAX_MS) run as local activities of the
  // main worker, each inside a workflow task it holds meanwhile. The tenant counter the calls worker shares keeps
  // them to its call slots (and a quarter of them more waiting briefly for a place), so the main worker gets as many
  // local activity and workflow task slots more: the steps' and the other workflows' stay theirs. Its cache of
  // workflows grows by as many over its task slots: with as many task slots as cached workflows (100 each),
  // workflow tasks were run again and inline calls with them (bench:engine phase d: 1,022 deliveries for 1,000
  // instances, the machine 136 % busy instead of 187 %; bench/README.md). The calls activity is registered even
  // with WORKER_INLINE_CALL_MAX_MS=0: a run whose step was marked inline before asks for it as a local activity.
  const inlineSlots = inlineCallMaxMs > 0 ? outboundCallSlots + waitingCallSlots(outboundCallSlots) : 0;
  const main = await createWorker({
    ...where,
    deps: activityDeps,
    workflowBundlePath: d.workflowBundlePath,
    // Each activity holds at most one of the pool's connections: batches have theirs, the rest is split.
    maxConcurrentActivities: slots.regular,
    maxConcurrentLocalActivities: slots.local + inlineSlots,
    inlineCalls: callDeps,
    ...(inlineSlots > 0
      ? {
          maxConcurrentWorkflowTasks: SDK_WORKFLOW_TASK_SLOTS + inlineSlots,
          maxCachedWorkflows: Math.max(config.cachedWorkflows, SDK_WORKFLOW_TASK_SLOTS) + inlineSlots,
        }
      : { maxCachedWorkflows: config.cachedWorkflows }),
    options,
  });
  const batches = await createBatchWorker({ ...where, deps: activityDeps, slots: batchSlots, options });
  const callsWorker = await createCallsWorker({
    ...where,
    deps: callDeps,
    slots: outboundCallSlots,
    options,
  });
  return [main, batches, callsWorker];
}
