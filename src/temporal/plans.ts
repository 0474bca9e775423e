import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import { planWorkflowId, WORKFLOW_TYPES } from './names.js';

export interface PlanProcessing {
  taskQueue: string;
  batchSize: number;
  window: number;
  batchesPerRun: number;
}

/**
 * Starts the durable processing of a stored plan: the workflow `alteration-plan-{planId}`. Starting it
 * again while it runs, or after it completed, starts nothing new (the id is the plan's); only a run that
 * failed or was terminated may be started again.
 */
export async function startPlanWorkflow(
  client: Client,
  processing: PlanProcessing,
  planId: string,
  /** Shown in the Temporal UI beside the run (tenant, alteration types): never secrets. */
  memo?: Record<string, unknown>,
): Promise<void> {
  try {
    await client.workflow.start(WORKFLOW_TYPES.alterationPlan, {
      workflowId: planWorkflowId(planId),
      taskQueue: processing.taskQueue,
      args: [{ planId, batchSize: processing.batchSize, window: processing.window, batchesPerRun: processing.batchesPerRun }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
      ...(memo ? { memo } : {}),
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return;
    throw err;
  }
}
