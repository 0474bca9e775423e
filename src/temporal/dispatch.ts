import type { Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/client';
import { instanceExecution, workAvailable } from '../../workflows/index.js';
import { instanceWorkflowId } from './names.js';
import type { Dispatcher } from '../engine/ports.js';
import { TenantGate } from '../shares.js';
import { tenantPriority } from './fairness.js';

/** Requests one dispatch makes at once (a tenant's share of them all is TENANT_TEMPORAL_REQUESTS). */
const DISPATCH_CONCURRENCY = 16;
/** How long a dispatch waits for its tenant's turn at Temporal before it fails (a transient error). */
const TURN_WAIT_MS = 5 * 60_000;

/**
 * Dispatch through Temporal: signal-with-start of `workflow-instance-{id}`. A running execution gets a
 * signal and picks the new work up; a finished one is started again. Either way one execution per
 * instance runs at a time, because the workflow id is derived from the instance id. Each dispatch after
 * the instance suspended is a new run under the same id; its result says where the instance stands.
 */
export function temporalDispatcher(
  client: Client,
  taskQueue: string,
  /** `requestsPerTenant`: the share of Temporal requests one tenant's dispatches have in flight at once; none without. */
  opts: { searchAttributes?: boolean; requestsPerTenant?: number } = {},
): Dispatcher {
  const searchAttributes = opts.searchAttributes ?? false;
  // Temporal is shared by every tenant: one tenant's requests in flight from this process, whatever number
  // of its dispatches run at once (ten triggers of thousands of instances), are TENANT_TEMPORAL_REQUESTS at
  // most, so that another tenant's start or signal is not queued behind them.
  const turns = opts.requestsPerTenant === undefined ? undefined : new TenantGate(opts.requestsPerTenant);
  return {
    async dispatch(tenantKey, instanceIds) {
      const queue = [...new Set(instanceIds)];
      const priority = tenantPriority(tenantKey);
      const send = (id: string) =>
        client.workflow.signalWithStart(instanceExecution, {
          workflowId: instanceWorkflowId(id),
          taskQueue,
          args: [{ instanceId: id, searchAttributes }],
          staticSummary: `Execution of workflow instance ${id}: runs its scheduled activities until it suspends or ends`,
          signal: workAvailable,
          signalArgs: [],
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
          priority,
        });
      const workers = Array.from({ length: Math.min(DISPATCH_CONCURRENCY, queue.length) }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          const done = turns ? await turns.acquire(tenantKey, TURN_WAIT_MS) : () => undefined;
          try {
            await send(id);
          } finally {
            done();
          }
        }
      });
      await Promise.all(workers);
    },
  };
}
