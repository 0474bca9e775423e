import type { Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { instanceExecution, workAvailable } from '../../workflows/index.js';
import { instanceWorkflowId } from './names.js';
import type { Dispatcher } from '../engine/ports.js';
import { tenantPriority } from './fairness.js';

const DISPATCH_CONCURRENCY = 16;

/**
 * Dispatch through Temporal: signal-with-start of `workflow-instance-{id}`. A running execution gets a
 * signal and picks the new work up; a finished one is started again. Either way one execution per
 * instance runs at a time, because the workflow id is derived from the instance id. Each dispatch after
 * the instance suspended is a new run under the same id; its result says where the instance stands.
 */
export function temporalDispatcher(
  client: Client,
  taskQueue: string,
  opts: { searchAttributes?: boolean } = {},
): Dispatcher {
  const searchAttributes = opts.searchAttributes ?? false;
  return {
    async dispatch(tenantKey, instanceIds) {
      const queue = [...new Set(instanceIds)];
      const priority = tenantPriority(tenantKey);
      const workers = Array.from({ length: Math.min(DISPATCH_CONCURRENCY, queue.length) }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          await client.workflow.signalWithStart(instanceExecution, {
            workflowId: instanceWorkflowId(id),
            taskQueue,
            args: [{ instanceId: id, searchAttributes }],
            staticSummary: `Execution of workflow instance ${id}: runs its scheduled activities until it suspends or ends`,
            signal: workAvailable,
            signalArgs: [],
            workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
            priority,
          });
        }
      });
      await Promise.all(workers);
    },
  };
}
