import { checkExpectConstrains, checkFilterReferences, countInstances } from '../alterations/filter.js';
import {
  approvalNeeded,
  decidePlan,
  getPolicy,
  holdsUnapproved,
  pendingApproval,
  principalRef,
} from '../alterations/governance.js';
import { withTransaction } from '../db/pool.js';
import { isFinished, PLAN_STATUS, type PlanStatus, planStatusName, type Rollout } from '../alterations/model.js';
import { RETRY_INCLUDES, type RetryInclude } from '../alterations/requests.js';
import {
  cancelPlan,
  changeRollout,
  getPlanView,
  pausePlan,
  resumePlan,
  submitPlan,
  submitRevert,
  type SubmitRequest,
} from '../alterations/plans.js';
import type { PlanView } from '../alterations/views.js';
import { type Principal, tenantKey, tenantOut } from '../auth/principal.js';
import { signalPlanChanged, startPlanWorkflow } from '../temporal/plans.js';
import { ConflictError } from '../errors.js';
import type { AppDeps } from './context.js';

/**
 * What each plan command does, defined once for every door it comes through: the API routes
 * (src/api/routes/alterations.ts) and the console's forms (src/console/pages/plan.tsx, new-plan.tsx) call
 * these after the same permission check (src/auth/route-permissions.ts), so a rule added here (the approval
 * a plan may need before it starts, say) holds for both. Each changes the plan row first (the source of truth), then
 * tells Temporal.
 */
type Deps = Pick<AppDeps, 'pool' | 'temporal' | 'planProcessing' | 'logger'>;

/**
 * Stores a plan and starts its workflow `alteration-plan-{planId}`. The plan is Pending, or AwaitingApproval
 * (contract section 10) when its body asks for a review, or the tenant's policy wants one (always, or above
 * a count of matched instances at submission); the submitter is recorded, for the four-eyes rule.
 */
export async function submitPlanCommand(
  deps: Deps,
  principal: Principal,
  body: SubmitRequest,
  made: { retryOf?: string } = {},
) {
  const { pool } = deps;
  const tenant = tenantKey(principal.tenantId);
  const submittedBy = principalRef(principal);
  // One instant for the submission: the plan's createdAt, and its approval's expiresAt = createdAt + TTL.
  const now = new Date();
  // The tenant's policy (or the body) may make it wait for a second principal's approval; the instances
  // are counted only when the answer depends on it.
  await checkFilterReferences(pool, tenant, body.filter, '/filter');
  if (body.verify) checkExpectConstrains(body.verify.expect, '/verify/expect');
  const policy = await getPolicy(pool, tenant);
  const counting = policy.approval !== 'never' || body.approval?.required === true;
  const matched = counting ? await countInstances(pool, body.filter, tenant) : 0;
  const approval = approvalNeeded(policy, body.approval?.required === true, matched)
    ? pendingApproval(policy, submittedBy, matched, now)
    : null;
  const { planId } = await submitPlan(pool, tenant, body, now, { submittedBy, approval, ...made });
  // Started again for a resubmitted id too: a no-op when it already runs or ran, and it completes a
  // submit whose first attempt stored the plan but could not start it.
  const stored = await getPlanView(pool, tenant, planId);
  await startPlanWorkflow(deps.temporal.current(), deps.planProcessing, planId, {
    tenantId: principal.tenantId,
    alterations: body.alterations,
    filter: body.filter,
    approval: stored.status === PLAN_STATUS.AwaitingApproval ? stored.approval : null,
    scheduled: stored.schedule !== null,
    verify: stored.verification !== null,
  });
  return { planId };
}

/**
 * `POST /alterations/run` under the tenant's approval policy: a change the policy would hold for a second
 * principal as a plan (always; above a threshold the distinct ids exceed, alone or with the tenant's other changes
 * made without approval in the last hour) is not made at once either, or the policy would be one request away
 * from moot. A 409 says to submit it as a plan; under `never` (and at or
 * below the threshold) it runs. A retry of what faulted is not held (an incident cannot wait); a retry naming
 * `activityIds` schedules them whether they faulted or not, and is held as a run.
 */
export async function checkRunAllowed(deps: Deps, principal: Principal, workflowInstanceIds: readonly string[]) {
  const count = new Set(workflowInstanceIds).size;
  // Counted with the tenant's other changes made without approval in the last hour (`holdsUnapproved`): 27 runs
  // of 2 instances are held under `above 2` as one run of 54 is.
  const held = await withTransaction(deps.pool, (client) =>
    holdsUnapproved(client, tenantKey(principal.tenantId), count, new Date(), null),
  );
  if (!held) return;
  const { policy, reason } = held;
  throw new ConflictError(
    `The tenant's approval policy (${
      policy.approval === 'always' ? 'always' : `above ${policy.approvalThreshold} instances`
    }) holds this change for a second principal's approval (${reason}): submit it as a plan (POST /alterations/submit with filter.workflowInstanceIds) to have it approved`,
  );
}

/** Pauses a plan (batches in flight finish); answers once they have. */
export async function pausePlanCommand(deps: Deps, principal: Principal, planId: string) {
  await pausePlan(deps.pool, tenantKey(principal.tenantId), planId);
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return { planId, status: PLAN_STATUS.Paused as PlanStatus };
}

/**
 * Resumes a Paused plan; answers the status it has now. Outside its maintenance windows it is a 409 naming
 * the next one, unless `ignoreSchedule`: then the plan runs now, to its end, its schedule dropped.
 */
export async function resumePlanCommand(
  deps: Deps,
  principal: Principal,
  planId: string,
  opts: { ignoreSchedule?: boolean | undefined } = {},
) {
  const status = await resumePlan(deps.pool, tenantKey(principal.tenantId), planId, opts);
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
  // A plan awaiting approval is withdrawn by the cancel: its record says by whom (its submitter, or another
  // principal with alterations:execute).
  await cancelPlan(deps.pool, tenantKey(principal.tenantId), planId, new Date(), principalRef(principal));
  // A paused or throttled workflow is waiting: it ends now instead of at its next look at the row.
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return { planId, status: PLAN_STATUS.Cancelled as PlanStatus };
}

/**
 * Submits the plan that retries what a finished plan did not get done (contract section 12): the same
 * alterations, rollout, maintenance windows and `verify` over `filter: {planJobs: {planId, statuses: ['Failed', 'Completed'],
 * verifications: ['Unverified']}}` (what `include` asks for), recorded as `retryOf`. It is a plan like any
 * other: the approval policy, the schedule rules and the permissions apply. A 409 while the plan is not
 * finished, for a revert (revert again instead), or when nothing is left to retry.
 */
export async function retryFailedCommand(
  deps: Deps,
  principal: Principal,
  planId: string,
  body: { id?: string | undefined; include?: readonly RetryInclude[] | undefined },
) {
  const plan = await getPlanView(deps.pool, tenantKey(principal.tenantId), planId);
  if (!isFinished(plan.status))
    throw new ConflictError(`Plan ${planId} is not finished (${planStatusName(plan.status)}): retry it once it is`);
  if (plan.revertOf)
    throw new ConflictError(`Plan ${planId} is a revert: revert plan ${plan.revertOf} again to restore what it left`);
  const include = new Set(body.include ?? RETRY_INCLUDES);
  const failed = include.has('Failed');
  const unverified = include.has('Unverified') && plan.verification !== null;
  const left = (failed ? plan.jobCounts.failed : 0) + (unverified ? plan.verification!.unverified : 0);
  if (left === 0)
    throw new ConflictError(
      `Plan ${planId} has nothing left to retry: no job of it ${[...include].join(' or ').toLowerCase()}`,
    );
  // A failed job has no verification: it is chosen by its status alone; a completed one only when Unverified.
  const statuses = [...(failed ? (['Failed'] as const) : []), ...(unverified ? (['Completed'] as const) : [])];
  const request: SubmitRequest = {
    ...(body.id !== undefined ? { id: body.id } : {}),
    alterations: plan.alterations,
    filter: { planJobs: { planId, statuses, ...(unverified ? { verifications: ['Unverified' as const] } : {}) } },
    ...(plan.rollout ? { rollout: plan.rollout } : {}),
    // Its maintenance windows hold for the retry too (its notBefore has passed: the plan finished).
    ...(plan.schedule?.windows ? { schedule: { windows: plan.schedule.windows } } : {}),
    ...(plan.verification
      ? { verify: { expect: plan.verification.expect, withinSeconds: plan.verification.withinSeconds } }
      : {}),
  };
  return submitPlanCommand(deps, principal, request, { retryOf: planId });
}

/** Stores and starts the plan that reverts a finished plan; answers its id. */
export async function revertPlanCommand(deps: Deps, principal: Principal, planId: string, id: string | undefined) {
  const tenant = tenantKey(principal.tenantId);
  const submittedBy = principalRef(principal);
  const now = new Date();
  // A revert changes instances in bulk as its plan did: the tenant's policy holds it as it would hold a plan
  // over the instances it restores (the reverted plan's completed jobs), and its reverter is recorded.
  const policy = await getPolicy(deps.pool, tenant);
  const matched = policy.approval === 'never' ? 0 : (await getPlanView(deps.pool, tenant, planId)).jobCounts.completed;
  const approval = approvalNeeded(policy, false, matched) ? pendingApproval(policy, submittedBy, matched, now) : null;
  const reverted = await submitRevert(deps.pool, tenant, planId, id, now, { submittedBy, approval });
  const stored = await getPlanView(deps.pool, tenant, reverted.planId);
  await startPlanWorkflow(deps.temporal.current(), deps.planProcessing, reverted.planId, {
    tenantId: tenantOut(reverted.original.tenant_id),
    alterations: [],
    filter: reverted.original.filter,
    revertOf: planId,
    approval: stored.status === PLAN_STATUS.AwaitingApproval ? stored.approval : null,
    verify: stored.verification !== null,
  });
  return { planId: reverted.planId };
}

/**
 * Decides a plan awaiting approval (contract section 10): Approved, it goes on as if just submitted;
 * Rejected, it is Cancelled with no job. The principal that submitted it (or a key it made) is refused with
 * a 403 (`SELF_APPROVAL`); a plan not AwaitingApproval is a 409. Answers its status now.
 */
export async function decidePlanCommand(
  deps: Deps,
  principal: Principal,
  planId: string,
  decision: 'approve' | 'reject',
  comment: string | null,
) {
  const by = principalRef(principal);
  const status = await decidePlan(
    deps.pool,
    tenantKey(principal.tenantId),
    planId,
    decision === 'approve' ? 'Approved' : 'Rejected',
    by,
    comment,
  );
  deps.logger.info({ planId, decision, by }, `plan ${decision === 'approve' ? 'approved' : 'rejected'}`);
  await signalPlanChanged(deps.temporal.current(), planId, deps.logger);
  return { planId, status };
}
