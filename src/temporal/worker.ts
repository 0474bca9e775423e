import { fileURLToPath } from 'node:url';
import type { NativeConnection} from '@temporalio/worker';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { type ActivityDeps, createActivities } from '../../activities/index.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

export interface WorkerSetup {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** A pre-built workflow bundle (tests build one for all files); else the workflows are bundled now. */
  workflowBundlePath?: string | undefined;
  /**
   * Activities run at once. Each holds at most one connection of the worker's pool at a time, so this is
   * the worker pool's size: a slot never waits for a connection another slot of the same worker holds.
   */
  maxConcurrentActivities: number;
  /** Extra worker options (tests shorten the shutdown grace time). */
  options?: Partial<WorkerOptions>;
}

/** Creates the worker that runs both the workflows and the activities of this service. */
export async function createWorker(setup: WorkerSetup): Promise<Worker> {
  return Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: setup.taskQueue,
    ...(setup.workflowBundlePath ? { workflowBundle: { codePath: setup.workflowBundlePath } } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities(setup.deps),
    maxConcurrentActivityTaskExecutions: setup.maxConcurrentActivities,
    shutdownGraceTime: '10 seconds',
    ...setup.options,
  });
}
