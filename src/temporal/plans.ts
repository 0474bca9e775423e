import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import type pg from 'pg';
import { pendingPlanIds } from '../alterations/plans.js';
import type { Logger } from '../logger.js';
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

/**
 * At worker start: plans stored while no workflow could be started (an API stopped between storing and
 * starting one) are started now. Starting one that is already running is a no-op.
 */
export async function startPendingPlans(pool: pg.Pool, client: Client, processing: PlanProcessing, logger: Logger): Promise<string[]> {
  const started: string[] = [];
  for (const planId of await pendingPlanIds(pool)) {
    try {
      await startPlanWorkflow(client, processing, planId);
      started.push(planId);
    } catch (err) {
      logger.warn({ err, planId }, 'could not start a pending plan');
    }
  }
  return started;
}
