import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { NativeConnection } from '@temporalio/worker';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { type ActivityDeps, createActivities } from '../../activities/index.js';
import { type CallDeps, createCallActivities, createCallMaker } from '../../activities/calls.js';
import { batchesTaskQueue, callsTaskQueue } from '../../workflows/task-queues.js';
import { bundleWorkflowsApart } from './bundle.js';
import { readTidings } from './instance-tidings.js';

export { slimWorkflowBundle, WORKFLOW_INTERCEPTORS_PATH, WORKFLOWS_PATH } from './bundle.js';
/** Compiled (dist/src/temporal/worker.js): `npm run build` bundled the workflows once, next to dist/src. */
const BUILT = import.meta.url.endsWith('.js');
const BUILT_BUNDLE = fileURLToPath(new URL('../../workflow-bundle.js', import.meta.url));

export interface WorkerSetup {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /**
   * A pre-built workflow bundle (tests build one for all files); else the build's bundle when running from
   * dist/, or the workflows bundled now from source (tsx, `npm start`).
   */
  workflowBundlePath?: string | undefined;
  /**
   * Activities run at once. Each holds at most one connection of the worker's pool at a time, so this is
   * the worker pool's size: a slot never waits for a connection another slot of the same worker holds.
   */
  maxConcurrentActivities: number;
  /** Local activities (plan generation and completion) run at once; each holds a connection too. */
  maxConcurrentLocalActivities?: number;
  /** Workflow tasks in progress at once (the SDK's default, 40, when absent). */
  maxConcurrentWorkflowTasks?: number;
  /**
   * The calls activity's own deps, to make calls marked `inline` as local activities of this worker (its calls
   * pool, and the same tenant counter and wake line as the calls worker's).
   */
  inlineCalls?: CallDeps;
  /** Workflows kept in memory between their tasks (WORKER_CACHED_WORKFLOWS). */
  maxCachedWorkflows?: number;
  /** Extra worker options (tests shorten the shutdown grace time). */
  options?: Partial<WorkerOptions>;
}

/** The main worker's activities: the steps, and with `inlineCalls` the calls activity, which the steps use too. */
function withInlineCalls(setup: WorkerSetup) {
  const makeCall = setup.inlineCalls ? createCallMaker(setup.inlineCalls) : undefined;
  return {
    ...createActivities({ tidings: readTidings, ...setup.deps, ...(makeCall ? { callOutbound: makeCall } : {}) }),
    ...(setup.inlineCalls && makeCall ? createCallActivities(setup.inlineCalls, makeCall) : {}),
  };
}

/** Creates the worker that runs both the workflows and the activities of this service. */
export async function createWorker(setup: WorkerSetup): Promise<Worker> {
  const bundle = setup.workflowBundlePath ?? (BUILT ? BUILT_BUNDLE : undefined);
  if (bundle && !existsSync(bundle)) throw new Error(`The workflow bundle ${bundle} is missing: run npm run build`);
  return Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: setup.taskQueue,
    // From source, the code is bundled in a child process (src/temporal/bundle.ts), never in this one.
    workflowBundle: bundle ? { codePath: bundle } : { code: await bundleWorkflowsApart() },
    // A step tells its own workflow the word it missed (StepResult.told), read as the relay reads it, and makes the
    // call it started when the call is inline (activities/index.ts, `callInStep`).
    activities: withInlineCalls(setup),
    maxConcurrentActivityTaskExecutions: setup.maxConcurrentActivities,
    ...(setup.maxConcurrentLocalActivities
      ? { maxConcurrentLocalActivityExecutions: setup.maxConcurrentLocalActivities }
      : {}),
    ...(setup.maxConcurrentWorkflowTasks
      ? { maxConcurrentWorkflowTaskExecutions: setup.maxConcurrentWorkflowTasks }
      : {}),
    ...(setup.maxCachedWorkflows ? { maxCachedWorkflows: setup.maxCachedWorkflows } : {}),
    shutdownGraceTime: '10 seconds',
    ...setup.options,
  });
}

export interface CallsWorkerSetup {
  connection: NativeConnection;
  namespace: string;
  /** The service's task queue; this worker polls its calls queue (`callsTaskQueue`). */
  taskQueue: string;
  deps: CallDeps;
  /** Outbound calls this worker makes at once (WORKER_OUTBOUND_CALL_SLOTS). */
  slots: number;
  options?: Partial<WorkerOptions>;
}

/**
 * The worker of the calls task queue: activities only (outbound calls), in slots of their own. A call
 * holds its slot for as long as its endpoint takes (up to the connection's timeoutMs) and no database
 * connection meanwhile, so it has its own small pool for reading what to call.
 */
export async function createCallsWorker(setup: CallsWorkerSetup): Promise<Worker> {
  const { workflowBundle: _bundle, workflowsPath: _path, ...options } = setup.options ?? {};
  return Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: callsTaskQueue(setup.taskQueue),
    activities: createCallActivities(setup.deps),
    maxConcurrentActivityTaskExecutions: setup.slots,
    shutdownGraceTime: '10 seconds',
    ...options,
  });
}

/**
 * The worker of the batches task queue: plan batches only, WORKER_BATCH_SLOTS at once. Few slots on
 * purpose: batches are bound by Postgres and the cores, so more at once only make each slower, and a queue
 * that backs up is where Task Queue Fairness takes turns between tenants (and weights small plans ahead).
 */
export async function createBatchWorker(
  setup: Omit<CallsWorkerSetup, 'deps'> & { deps: ActivityDeps },
): Promise<Worker> {
  const { workflowBundle: _bundle, workflowsPath: _path, ...options } = setup.options ?? {};
  const { runJobBatch } = createActivities(setup.deps);
  return Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: batchesTaskQueue(setup.taskQueue),
    activities: { runJobBatch },
    maxConcurrentActivityTaskExecutions: setup.slots,
    shutdownGraceTime: '10 seconds',
    ...options,
  });
}
