import { PLAN_STATUS, type PlanStatus, type Rollout } from '../alterations/model.js';
import {
  cancelPlan,
  changeRollout,
  pausePlan,
  resumePlan,
  submitPlan,
  submitRevert,
  type SubmitRequest,
} from '../alterations/plans.js';
import type { PlanView } from '../alterations/views.js';
import { type Principal, tenantKey, tenantOut } from '../auth/principal.js';
import { signalPlanChanged, startPlanWorkflow } from '../temporal/plans.js';
import type { AppDeps } from './context.js';

/**
 * What each plan command does, defined once for every door it comes through: the API routes
 * (src/api/routes/alterations.ts) and the console's forms (src/console/pages/plan.tsx, new-plan.tsx) call
 * these after the same permission check (src/auth/route-permissions.ts), so a rule added here (an approval
 * before a plan starts, say) holds for both. Each changes the plan row first (the source of truth), then
 * tells Temporal.
 */
type Deps = Pick<AppDeps, 'pool' | 'temporal' | 'planProcessing' | 'logger'>;

/** Stores a plan (status Pending) and starts its workflow `alteration-plan-{planId}`. */
export async function submitPlanCommand(deps: Deps, principal: Principal, body: SubmitRequest) {
  const { planId } = await submitPlan(deps.pool, tenantKey(principal.tenantId), body);
  // Started again for a resubmitted id too: a no-op when it already runs or ran, and it completes a
  // submit whose first attempt stored the plan but could not start it.
  await startPlanWorkflow(deps.temporal.current(), deps.planProcessing, planId, {
    tenantId: principal.tenantId,
    alterations: body.alterations,
    filter: body.filter,
  });
  return { planId };
}

/** Pauses a plan (batches in flight finish); answers once they have. */
export async function pausePlanCommand(deps: Deps, principal: Principal, planId: string) {
  await pausePlan(deps.pool, tenantKey(principal.tenantId), planId);
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return { planId, status: PLAN_STATUS.Paused as PlanStatus };
}

/** Resumes a Paused plan; answers the status it has now. */
export async function resumePlanCommand(deps: Deps, principal: Principal, planId: string) {
  const status = await resumePlan(deps.pool, tenantKey(principal.tenantId), planId);
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return { planId, status };
}

/** Changes the rate or failure ratio of a running or paused plan, from its next batch. */
export async function rolloutPlanCommand(
  deps: Deps,
  principal: Principal,
  planId: string,
  patch: Pick<Rollout, 'rate' | 'stopOnFailureRatio'>,
): Promise<PlanView> {
  const plan = await changeRollout(deps.pool, tenantKey(principal.tenantId), planId, patch);
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return plan;
}

/** Cancels a plan: pending jobs Cancelled, the plan Cancelled. */
export async function cancelPlanCommand(deps: Deps, principal: Principal, planId: string) {
  await cancelPlan(deps.pool, tenantKey(principal.tenantId), planId);
  // A paused or throttled workflow is waiting: it ends now instead of at its next look at the row.
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return { planId, status: PLAN_STATUS.Cancelled as PlanStatus };
}

/** Stores and starts the plan that reverts a finished plan; answers its id. */
export async function revertPlanCommand(deps: Deps, principal: Principal, planId: string, id: string | undefined) {
  const reverted = await submitRevert(deps.pool, tenantKey(principal.tenantId), planId, id);
  await startPlanWorkflow(deps.temporal.current(), deps.planProcessing, reverted.planId, {
    tenantId: tenantOut(reverted.original.tenant_id),
    alterations: [],
    filter: reverted.original.filter,
    revertOf: planId,
  });
  return { planId: reverted.planId };
}
