import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/client';
import type pg from 'pg';
import { pendingPlanIds } from '../alterations/plans.js';
import { tenantOut } from '../auth/principal.js';
import type { Logger } from '../logger.js';
import { alterationPlan } from '../../workflows/index.js';
import { planWorkflowId } from './names.js';

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
    await client.workflow.start(alterationPlan, {
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
      await startPlanWorkflow(client, processing, planId, await storedPlanMemo(pool, planId));
      started.push(planId);
    } catch (err) {
      logger.warn({ err, planId }, 'could not start a pending plan');
    }
  }
  return started;
}

/**
 * The memo the API gives a plan it starts (tenant as the API shows it, alteration types), read back
 * from the stored plan, so a swept plan looks the same in the Temporal UI.
 */
async function storedPlanMemo(pool: pg.Pool, planId: string): Promise<Record<string, unknown> | undefined> {
  const { rows } = await pool.query<{ tenant_id: string; alterations: { type: string }[] }>(
    'SELECT tenant_id, alterations FROM alteration_plans WHERE id = $1',
    [planId],
  );
  const row = rows[0];
  return row ? { tenantId: tenantOut(row.tenant_id), alterations: row.alterations.map((a) => a.type) } : undefined;
}
