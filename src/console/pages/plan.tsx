import { type AuditEntry, listAuditEntries } from '../../audit/trail.js';
import { AuditEntries } from './audit.js';
import { mayReadInstances } from '../../api/authorize.js';
import { type Context, Hono } from 'hono';
import { isFinished, PLAN_STATUS, RolloutPatchSchema } from '../../alterations/model.js';
import { getPlanView, listJobs } from '../../alterations/plans.js';
import { previewShown, previewStoredPlan } from '../../alterations/preview.js';
import { revertingPlanId } from '../../alterations/plan-store/index.js';
import type { JobView, PlanView } from '../../alterations/views.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import {
  cancelPlanCommand,
  pausePlanCommand,
  resumePlanCommand,
  retryFailedCommand,
  revertPlanCommand,
  rolloutPlanCommand,
} from '../../api/plan-commands.js';
import {
  ALTERATIONS_APPROVE,
  ALTERATIONS_EXECUTE,
  ALTERATIONS_VIEW,
  AUDIT_VIEW,
} from '../../auth/route-permissions.js';
import { ValidationError, zodFieldErrors } from '../../errors.js';
import { planSummary } from '../../alterations/summary.js';
import { NotAllowed, Notice, TimeFact } from '../components.js';
import { field, readForm } from '../form.js';
import { count, PLAN_STATUS_LABELS, planStatusLabel, plural } from '../format.js';
import { fourEyesNote, ScheduleFacts } from '../governance.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { may, permissionName, requirePermission, type ShellOf } from '../shell.js';
import {
  Actions,
  ApprovalSection,
  type ApprovalView,
  done,
  JOB_FILTERS,
  JOBS_PAGE,
  Jobs,
  NOTICES,
  planPath,
  temporalLink,
} from './plan-parts.js';

/** A plan is for those who may see plans. */
const ACCESS: PageAccess = { title: 'Plan', nav: 'plans', what: 'see plans', permission: ALTERATIONS_VIEW };
/** The newest entries of the audit trail about a plan that its page shows (`wfa audit --target` lists all). */
const TRAIL_ENTRIES = 20;

function PlanPage(props: {
  shell: Shell;
  plan: PlanView;
  revertedBy: string | null;
  temporalUrl: string | undefined;
  canExecute: boolean;
  executePermission: string;
  approval: ApprovalView;
  notice: string | undefined;
  jobs: { view: string; after: string | undefined; items: JobView[]; nextCursor: string | null };
  /** The audit trail's entries about the plan (undefined: the user may not read the trail). */
  trail: { entries: AuditEntry[]; permission: string } | { entries?: undefined; permission: string };
}) {
  const { plan } = props;
  const finished = isFinished(plan.status);
  const c = plan.jobCounts;
  const r = plan.rollout;
  return (
    <Layout
      shell={props.shell}
      title={`Plan ${plan.id}`}
      nav="plans"
      data={{
        'plan-id': plan.id,
        'status-labels': JSON.stringify(PLAN_STATUS_LABELS),
        ...(finished ? {} : { 'events-url': `${planPath(plan.id)}/events` }),
      }}
    >
      <h1>
        Plan <code>{plan.id}</code>
      </h1>
      <Notice text={props.notice} />
      <p id="problem" class="problem" role="alert" hidden></p>
      <section aria-labelledby="progress-heading">
        <h2 id="progress-heading">Progress</h2>
        <dl class="facts">
          <dt>Status</dt>
          <dd>
            <strong role="status" aria-label="Plan status" data-field="statusLabel">
              {planStatusLabel(plan.status)}
            </strong>
          </dd>
          <dt>Pause reason</dt>
          <dd data-field="pauseReason">{plan.pauseReason ?? '—'}</dd>
          <TimeFact term="Resumes at" iso={plan.resumesAt} field="resumesAt" />
          <dt>Jobs done</dt>
          <dd>
            <progress
              aria-label="Jobs done"
              data-field="progress"
              value={String(done(plan))}
              max={String(Math.max(1, c.total))}
            ></progress>
            <span data-field="doneText">{`${count(done(plan))} of ${count(c.total)}`}</span>
          </dd>
          <dt>Completed</dt>
          <dd data-field="completed">{count(c.completed)}</dd>
          <dt>Failed</dt>
          <dd data-field="failed">{count(c.failed)}</dd>
          <dt>Cancelled</dt>
          <dd data-field="cancelled">{count(c.cancelled)}</dd>
          <dt>Pending</dt>
          <dd data-field="pending">{count(c.pending)}</dd>
          {plan.drift ? (
            <>
              <dt>Skipped</dt>
              <dd data-field="skipped">{count(c.skipped)}</dd>
              <dt>Joined since approval</dt>
              <dd data-field="joined">
                {plan.drift.joined === null ? 'known once the plan completes' : count(plan.drift.joined)}
              </dd>
            </>
          ) : null}
          {plan.verification ? (
            <>
              <dt>Verified</dt>
              <dd data-field="verified">{count(plan.verification.verified)}</dd>
              <dt>Unverified</dt>
              <dd data-field="unverified">{count(plan.verification.unverified)}</dd>
              <dt>Still to verify</dt>
              <dd data-field="verifyPending">{count(plan.verification.pending)}</dd>
              <dt>Verify</dt>
              <dd>
                {`within ${count(plan.verification.withinSeconds)} s of each job, the instance matches `}
                <code>{JSON.stringify(plan.verification.expect)}</code>
              </dd>
            </>
          ) : null}
          <dt>Speed</dt>
          <dd>
            <span data-field="instancesPerSecond">{finished ? '—' : '0'}</span> instances per second
          </dd>
          {plan.outcome ? (
            <>
              <dt>Outcome</dt>
              <dd>{plan.outcome}</dd>
            </>
          ) : null}
          {plan.failureReason ? (
            <>
              <dt>Failure</dt>
              <dd>{plan.failureReason}</dd>
            </>
          ) : null}
        </dl>
        <p class="muted" id="live" role="status" aria-live="polite">
          {finished ? 'The plan has finished.' : 'Reload the page for the latest progress.'}
        </p>
        {props.canExecute && plan.revertOf === null ? (
          // Shown once the plan has finished with jobs that failed or were not verified (the script shows it
          // when the stream says so, without a reload).
          <form
            method="post"
            action={`${planPath(plan.id)}/retry-failed`}
            data-retry-failed
            hidden={!(finished && (c.failed > 0 || (plan.verification?.unverified ?? 0) > 0))}
          >
            <button type="submit" aria-describedby="retry-failed-hint">
              Retry failed
            </button>{' '}
            <small id="retry-failed-hint">
              A new plan with the same alterations, rollout and verify over the jobs that failed or were not verified.
            </small>
          </form>
        ) : null}
      </section>
      {plan.approval ? <ApprovalSection plan={plan} view={props.approval} /> : null}
      <section aria-labelledby="steer-heading">
        <h2 id="steer-heading">Steer</h2>
        {props.canExecute ? (
          <Actions plan={plan} revertedBy={props.revertedBy} />
        ) : (
          <NotAllowed what="pause, resume, cancel, revert or re-rate plans" permission={props.executePermission} />
        )}
      </section>
      <section aria-labelledby="about-heading">
        <h2 id="about-heading">About this plan</h2>
        <dl class="facts">
          <dt>What it does</dt>
          <dd>
            {planSummary({
              alterations: plan.alterations,
              filter: plan.workflowInstanceFilter,
              revertOf: plan.revertOf,
            })}
          </dd>
          <dt>Rate</dt>
          <dd data-field="rate">{r.rate ? `at most ${count(r.rate)} instances per second` : 'no limit'}</dd>
          <dt>Canary</dt>
          <dd>{r.canary ? `the first ${plural(r.canary, 'instance')}, then a pause` : 'none'}</dd>
          <dt>Stop on failure ratio</dt>
          <dd data-field="stopOnFailureRatio">{r.stopOnFailureRatio ?? 'never'}</dd>
          {plan.revertOf ? (
            <>
              <dt>Reverts</dt>
              <dd>
                <a href={planPath(plan.revertOf)}>{plan.revertOf}</a>
              </dd>
            </>
          ) : null}
          {props.revertedBy ? (
            <>
              <dt>Reverted by</dt>
              <dd>
                <a href={planPath(props.revertedBy)}>{props.revertedBy}</a>
              </dd>
            </>
          ) : null}
          <TimeFact term="Created" iso={plan.createdAt} />
          <TimeFact term="Started" iso={plan.startedAt} field="startedAt" />
          <TimeFact term="Finished" iso={plan.completedAt} field="completedAt" />
          <ScheduleFacts schedule={plan.schedule} />
          <dt>Temporal</dt>
          <dd>
            {props.temporalUrl ? (
              <a href={props.temporalUrl}>{`Workflow alteration-plan-${plan.id} in the Temporal UI`}</a>
            ) : (
              <span>
                Workflow <code>{`alteration-plan-${plan.id}`}</code> (set TEMPORAL_UI_URL to link to your Temporal UI)
              </span>
            )}
          </dd>
        </dl>
        <details>
          <summary>Alterations and filter as submitted</summary>
          <pre>
            <code>
              {JSON.stringify({ alterations: plan.alterations, filter: plan.workflowInstanceFilter }, null, 2)}
            </code>
          </pre>
        </details>
      </section>
      <Jobs
        plan={plan}
        view={props.jobs.view}
        after={props.jobs.after}
        jobs={props.jobs.items}
        nextCursor={props.jobs.nextCursor}
      />
      <section aria-labelledby="trail-heading">
        <h2 id="trail-heading">Audit trail</h2>
        {props.trail.entries ? (
          <AuditEntries entries={props.trail.entries} label="Audit entries about this plan" empty="No entry yet." />
        ) : (
          <NotAllowed what="read the audit trail" permission={props.trail.permission} />
        )}
      </section>
    </Layout>
  );
}

/** What the script needs after an action: the notice, and the plan's new state where the action knows it. */
function answered(
  c: Context<AppEnv>,
  planId: string,
  notice: keyof typeof NOTICES,
  extra: Record<string, unknown> = {},
) {
  if ((c.req.header('accept') ?? '').includes('application/json'))
    return c.json({ notice: NOTICES[notice], ...extra }, 200);
  return c.redirect(`${planPath(planId)}?notice=${notice}`, 303);
}

/** A rollout form's number: empty is null (the control removed). */
function formNumber(form: URLSearchParams, name: string): number | null {
  const v = field(form, name);
  if (v === '') return null;
  const n = Number(v);
  if (!Number.isFinite(n))
    throw new ValidationError(`${name} is not a number`, [{ path: `/${name}`, message: 'Not a number' }]);
  return n;
}

/**
 * A plan's page and its actions. The page reads the plan's counts (a few rows whatever its size) and one
 * page of its jobs, never all of them; its progress then comes from the plan's event stream (the API's, for
 * the session's principal). Each action is the API's command after the API's permission check.
 */
export function planRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/plans/:planId', gate(shell, ACCESS), async (c) => {
    const planId = c.req.param('planId');
    const { pool, tokens } = c.get('deps');
    const tenant = callerTenant(c);
    const view = JOB_FILTERS[c.req.query('jobs') ?? 'all'] ? (c.req.query('jobs') ?? 'all') : 'all';
    const after = c.req.query('after') || undefined;
    // One after the other: a request holds at most one connection at a time (its tenant's share).
    const plan = await getPlanView(pool, tenant, planId);
    const jobs = await listJobs(pool, tenant, planId, {
      status: JOB_FILTERS[view]!.status,
      after: after === undefined ? undefined : openCursor(tokens.key, after),
      limit: JOBS_PAGE,
    });
    const revertedBy = isFinished(plan.status) ? await revertingPlanId(pool, tenant, planId) : null;
    const waiting = plan.status === PLAN_STATUS.AwaitingApproval;
    const approval: ApprovalView = {
      mayDecide: may(c, ALTERATIONS_APPROVE),
      approvePermission: permissionName(c, ALTERATIONS_APPROVE),
      submitter: waiting && plan.approval ? await fourEyesNote(pool, c.get('principal'), plan.approval) : null,
      preview: waiting
        ? previewShown(
            await previewStoredPlan(
              { pool, definitions: c.get('deps').definitions },
              tenant,
              plan,
              10,
              c.req.raw.signal,
            ),
            mayReadInstances(c),
          )
        : undefined,
    };
    const asked = c.req.query('notice') ?? '';
    // A plan submitted into approval does not run yet: its notice says what it waits for.
    const notice = NOTICES[asked === 'submitted' && waiting ? 'submitted-awaiting' : asked];
    return renderPage(
      c,
      <PlanPage
        shell={shell(c)}
        plan={plan}
        revertedBy={revertedBy}
        temporalUrl={temporalLink(c, planId)}
        canExecute={may(c, ALTERATIONS_EXECUTE)}
        executePermission={permissionName(c, ALTERATIONS_EXECUTE)}
        approval={approval}
        notice={notice}
        jobs={{ view, after, items: jobs.items, nextCursor: sealCursor(tokens.key, jobs.nextCursor) }}
        trail={{
          permission: permissionName(c, AUDIT_VIEW),
          ...(may(c, AUDIT_VIEW)
            ? { entries: (await listAuditEntries(pool, tenant, { targetId: planId, limit: TRAIL_ENTRIES })).items }
            : {}),
        }}
      />,
    );
  });

  app.post('/plans/:planId/pause', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const result = await pausePlanCommand(c.get('deps'), c.get('principal'), c.req.param('planId'));
    return answered(c, result.planId, 'paused', {
      status: result.status,
      statusLabel: planStatusLabel(result.status),
      pauseReason: 'manual',
      resumesAt: null,
    });
  });
  app.post('/plans/:planId/resume', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const ignoreSchedule = field(await readForm(c), 'ignoreSchedule') === 'true';
    const result = await resumePlanCommand(c.get('deps'), c.get('principal'), c.req.param('planId'), {
      ignoreSchedule,
    });
    return answered(c, result.planId, ignoreSchedule ? 'resumed-now' : 'resumed', {
      status: result.status,
      statusLabel: planStatusLabel(result.status),
      pauseReason: null,
      resumesAt: null,
    });
  });
  app.post('/plans/:planId/cancel', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const result = await cancelPlanCommand(c.get('deps'), c.get('principal'), c.req.param('planId'));
    // A plan that awaited approval is withdrawn by its cancel (section 10): the page says so.
    const after = await getPlanView(c.get('deps').pool, callerTenant(c), result.planId);
    const withdrawn = after.approval?.state === 'Withdrawn';
    return answered(c, result.planId, withdrawn ? 'withdrawn' : 'cancelled', {
      status: result.status,
      statusLabel: planStatusLabel(result.status),
      ...(withdrawn ? { fields: { approvalState: 'Withdrawn' } } : {}),
    });
  });
  app.post('/plans/:planId/rollout', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const form = await readForm(c);
    const parsed = RolloutPatchSchema.safeParse({
      rate: formNumber(form, 'rate'),
      stopOnFailureRatio: formNumber(form, 'stopOnFailureRatio'),
    });
    if (!parsed.success)
      throw new ValidationError('The rollout is not valid; see errors', zodFieldErrors(parsed.error));
    const plan = await rolloutPlanCommand(c.get('deps'), c.get('principal'), c.req.param('planId'), parsed.data);
    const rate = plan.rollout.rate;
    return answered(c, plan.id, 'rollout', {
      fields: {
        rate: rate ? `at most ${count(rate)} instances per second` : 'no limit',
        stopOnFailureRatio: String(plan.rollout.stopOnFailureRatio ?? 'never'),
      },
    });
  });
  app.post('/plans/:planId/retry-failed', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const retry = await retryFailedCommand(c.get('deps'), c.get('principal'), c.req.param('planId'), {});
    return c.redirect(`${planPath(retry.planId)}?notice=submitted`, 303);
  });
  app.post('/plans/:planId/revert', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const reverted = await revertPlanCommand(c.get('deps'), c.get('principal'), c.req.param('planId'), undefined);
    const location = `${planPath(reverted.planId)}?notice=reverted`;
    if ((c.req.header('accept') ?? '').includes('application/json'))
      return c.json({ notice: NOTICES.reverted, location }, 200);
    return c.redirect(location, 303);
  });
  return app;
}
