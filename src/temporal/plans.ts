import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/client';
import type pg from 'pg';
import type { Alteration, Filter } from '../alterations/model.js';
import { pendingPlanIds, readPlanStart } from '../alterations/plan-store/index.js';
import { planSummary } from '../alterations/summary.js';
import { tenantOut } from '../auth/principal.js';
import type { Logger } from '../logger.js';
import { alterationPlan, planChangedSignal } from '../../workflows/index.js';
import {
  PLAN_STATUS_ATTRIBUTE,
  PLAN_TENANT_ATTRIBUTE,
  PLAN_TYPES_ATTRIBUTE,
} from '../../workflows/search-attributes.js';
import { PLAN_PRIORITY_KEY, planPriority } from './fairness.js';
import { planWorkflowId } from './names.js';

export interface PlanProcessing {
  taskQueue: string;
  batchSize: number;
  window: number;
  batchesPerRun: number;
  /** The plan search attributes are registered on the server (src/temporal/search-attributes.ts). */
  searchAttributes?: boolean;
  /**
   * Where this process also runs the worker of `taskQueue`: runs a start with a client on that worker's connection
   * (undefined while the worker does not run; src/service/workers.ts `withEagerClient`). A plan's workflow then
   * starts eagerly: its first task (the jobs' generation) runs on this process's worker as the start returns, when
   * the worker has a workflow task slot free (else through matching), rather than after a round through Temporal's
   * matching, which beside another tenant's running plan took tens of milliseconds (bench/README.md).
   */
  withEagerClient?: <T>(start: (eager: Client | undefined) => Promise<T>) => Promise<T>;
}

/** What the Temporal UI shows of a plan: its tenant, alterations and filter. Never secrets. */
export interface PlanMetadata {
  /** The API's tenant id (null: the default tenant). */
  tenantId: string | null;
  alterations: readonly Alteration[];
  filter: Filter;
  /** A revert plan: the plan it reverts. */
  revertOf?: string | null;
  /** The plan awaits approval (section 10): who asked, and when it expires (ISO). */
  approval?: { requestedBy: { kind: string; name: string }; expiresAt: string } | null;
  /** The plan has a schedule: it runs only in its maintenance windows (section 10). */
  scheduled?: boolean;
  /** The plan checks its effect (section 12). */
  verify?: boolean;
}

/**
 * Starts the durable processing of a stored plan: the workflow `alteration-plan-{planId}`. Starting it
 * again while it runs, or after it completed, starts nothing new (the id is the plan's); only a run that
 * failed or was terminated may be started again.
 */
export async function startPlanWorkflow(
  client: Client | undefined,
  processing: PlanProcessing,
  planId: string,
  plan?: PlanMetadata,
): Promise<void> {
  const start = (eager: Client | undefined) =>
    startThrough(eager ?? client, eager !== undefined, processing, planId, plan);
  return processing.withEagerClient ? processing.withEagerClient(start) : start(undefined);
}

/** `startPlanWorkflow` through `client`, asking for an eager start (`eager`: it is on this process's worker). */
async function startThrough(
  client: Client | undefined,
  eager: boolean,
  processing: PlanProcessing,
  planId: string,
  plan?: PlanMetadata,
): Promise<void> {
  // Temporal not up yet (a first start building its dev server): the plan stays Pending in its row, and the
  // worker starts every Pending plan's workflow once it runs (`startPendingPlans`).
  if (!client) return;
  const searchAttributes = Boolean(processing.searchAttributes && plan);
  try {
    await client.workflow.start(alterationPlan, {
      workflowId: planWorkflowId(planId),
      taskQueue: processing.taskQueue,
      args: [
        {
          planId,
          batchSize: processing.batchSize,
          window: processing.window,
          batchesPerRun: processing.batchesPerRun,
          searchAttributes,
          ...(plan?.approval
            ? { approval: { expiresAt: Date.parse(plan.approval.expiresAt), requestedBy: plan.approval.requestedBy } }
            : {}),
          ...(plan?.scheduled ? { scheduled: true } : {}),
          ...(plan?.verify ? { verify: true } : {}),
        },
      ],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
      ...(eager ? { requestEagerStart: true } : {}),
      // First on the task queue, and the tenant's fairness key: its batches take turns with other tenants'.
      priority: plan ? planPriority(plan.tenantId) : { priorityKey: PLAN_PRIORITY_KEY },
      ...(plan
        ? {
            memo: {
              tenantId: plan.tenantId,
              alterations: plan.alterations.map((a) => a.type),
              ...(plan.revertOf ? { revertOf: plan.revertOf } : {}),
            },
            staticSummary: planSummary(plan),
            staticDetails: planDetails(planId, plan),
          }
        : {}),
      ...(plan && searchAttributes
        ? {
            typedSearchAttributes: [
              { key: PLAN_STATUS_ATTRIBUTE, value: plan.approval ? 'AwaitingApproval' : 'Pending' },
              { key: PLAN_TENANT_ATTRIBUTE, value: plan.tenantId ?? 'default' },
              {
                key: PLAN_TYPES_ATTRIBUTE,
                value: plan.revertOf ? ['Revert'] : [...new Set(plan.alterations.map((a) => a.type))],
              },
            ],
          }
        : {}),
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return;
    throw err;
  }
}

/**
 * Tells a plan's workflow that its row changed (pause, resume, rollout, cancel), so it reads it at once.
 * The row is already the truth: batches obey it and a paused workflow reads it every minute, so a signal
 * that cannot be sent (Temporal unreachable, the workflow not started yet) only delays; it is logged.
 */
export async function signalPlanChanged(client: Client | undefined, planId: string, logger: Logger): Promise<void> {
  // Without Temporal up, no workflow runs yet: it reads the row when it starts.
  if (!client) return;
  try {
    await client.workflow.getHandle(planWorkflowId(planId)).signal(planChangedSignal);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return;
    logger.warn({ err, planId }, 'could not signal the plan workflow; it reads the plan row on its own');
  }
}

/** Markdown shown under the summary: the plan id, tenant, alterations and filter as submitted. */
function planDetails(planId: string, plan: PlanMetadata): string {
  const filter = Object.fromEntries(
    Object.entries(plan.filter).filter(
      ([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0),
    ),
  );
  return [
    `**Plan** \`${planId}\` · tenant \`${plan.tenantId ?? 'default'}\``,
    '',
    plan.revertOf
      ? `**Reverts** plan \`${plan.revertOf}\`: each instance it changed and nothing changed since`
      : `**Alterations**: \`${JSON.stringify(plan.alterations)}\``,
    '',
    `**Filter**: \`${JSON.stringify(filter)}\``,
    '',
    `Jobs and their logs: \`GET /alterations/${planId}\` or \`wfa plans show ${planId}\``,
  ].join('\n');
}

/**
 * At worker start: plans stored while no workflow could be started (an API stopped between storing and
 * starting one) are started now. Starting one that is already running is a no-op.
 */
export async function startPendingPlans(
  pool: pg.Pool,
  client: Client,
  processing: PlanProcessing,
  logger: Logger,
): Promise<string[]> {
  const started: string[] = [];
  for (const planId of await pendingPlanIds(pool)) {
    try {
      await startPlanWorkflow(client, processing, planId, await storedPlanMetadata(pool, planId));
      started.push(planId);
    } catch (err) {
      logger.warn({ err, planId }, 'could not start a pending plan');
    }
  }
  return started;
}

/** The metadata the API gives a plan it starts, read back from the stored plan, so a swept plan looks the same. */
async function storedPlanMetadata(pool: pg.Pool, planId: string): Promise<PlanMetadata | undefined> {
  const row = await readPlanStart(pool, planId);
  return row
    ? {
        tenantId: tenantOut(row.tenant_id),
        alterations: row.alterations,
        filter: row.filter,
        revertOf: row.revert_of,
        approval: row.awaiting,
        scheduled: row.scheduled,
        verify: row.verify,
      }
    : undefined;
}
