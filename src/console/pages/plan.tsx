import { mayReadInstances } from '../../api/authorize.js';
import { type Context, Hono } from 'hono';
import type { Child } from 'hono/jsx';
import { isFinished, JOB_STATUS, type JobStatus, PLAN_STATUS, RolloutPatchSchema } from '../../alterations/model.js';
import { getPlanView, listJobs } from '../../alterations/plans.js';
import { previewShown, previewStoredPlan } from '../../alterations/preview.js';
import { revertingPlanId } from '../../alterations/reverts.js';
import type { JobView, PlanView, PreviewItem } from '../../alterations/views.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import {
  cancelPlanCommand,
  pausePlanCommand,
  resumePlanCommand,
  revertPlanCommand,
  rolloutPlanCommand,
} from '../../api/plan-commands.js';
import { ALTERATIONS_APPROVE, ALTERATIONS_EXECUTE, ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import { ValidationError, zodFieldErrors } from '../../errors.js';
import { planSummary } from '../../temporal/plans.js';
import { NotAllowed, Notice, Scroll, Time } from '../components.js';
import { field, readForm } from '../form.js';
import {
  ACTION_STATUSES,
  count,
  JOB_STATUS_LABELS,
  LOG_LEVEL_LABELS,
  PAUSE_ALSO_WHEN,
  PLAN_STATUS_LABELS,
  planStatusLabel,
  plural,
} from '../format.js';
import {
  ApprovalFacts,
  DecisionForm,
  fourEyesNote,
  PreviewResult,
  ScheduleFacts,
  SubmitterNote,
} from '../governance.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { DECISION_NOTICES } from './approvals.js';
import { may, permissionName, requirePermission, type ShellOf } from '../shell.js';

const JOBS_PAGE = 50;

/** The job views a plan page offers: all jobs, or those of one status (the failed ones on their own). */
const JOB_FILTERS: Record<string, { label: string; status?: JobStatus }> = {
  all: { label: 'All jobs' },
  failed: { label: 'Failed', status: JOB_STATUS.Failed },
  completed: { label: 'Completed', status: JOB_STATUS.Completed },
  pending: { label: 'Pending', status: JOB_STATUS.Pending },
  cancelled: { label: 'Cancelled', status: JOB_STATUS.Cancelled },
};

/** What an action did, said on the plan's page afterwards (`?notice=`). */
const NOTICES: Record<string, string> = {
  paused: 'Paused: the batches in flight have finished; none starts until the plan is resumed.',
  resumed: 'Resumed: the plan carries on where it stopped.',
  'resumed-now': 'Resumed now, its schedule dropped: the plan runs to its end, outside its windows too.',
  cancelled: 'Cancelled: its pending jobs are cancelled.',
  withdrawn: 'Withdrawn: the plan awaited approval and is cancelled now; no job ran.',
  ...DECISION_NOTICES,
  rollout: 'Rollout changed: it applies from the next batch.',
  reverted: 'This plan reverts the plan it names: each instance that plan changed, unless something changed it since.',
  submitted: 'Submitted: the plan runs in the background; this page follows it live.',
  'submitted-awaiting':
    'Submitted: the plan awaits approval by someone else (Approvals); nothing runs until it is approved.',
};

/** The Temporal UI's page of the plan's workflow, when there is a UI to link to. */
function temporalLink(c: Context<AppEnv>, planId: string): string | undefined {
  const { temporal } = c.get('deps').config;
  const base =
    temporal.uiUrl ?? (!temporal.address && temporal.uiPort > 0 ? `http://localhost:${temporal.uiPort}` : undefined);
  if (!base) return undefined;
  return `${base}/namespaces/${encodeURIComponent(temporal.namespace)}/workflows/${encodeURIComponent(`alteration-plan-${planId}`)}`;
}

const planPath = (id: string) => `/console/plans/${encodeURIComponent(id)}`;
const done = (p: PlanView) => p.jobCounts.completed + p.jobCounts.failed + p.jobCounts.cancelled;

function StatusForm(props: {
  plan: PlanView;
  action: 'pause' | 'resume' | 'cancel' | 'revert';
  label: string;
  /** Shown for a Paused plan too when it paused for this reason (Pause of a plan paused by its schedule). */
  pausedFor?: string;
  children?: Child;
}) {
  const { plan } = props;
  const statuses = ACTION_STATUSES[props.action] as readonly number[];
  const shown =
    statuses.includes(plan.status) ||
    (props.pausedFor !== undefined && plan.status === PLAN_STATUS.Paused && plan.pauseReason === props.pausedFor);
  return (
    <form
      method="post"
      action={`${planPath(plan.id)}/${props.action}`}
      data-enhance="plan-action"
      data-statuses={statuses.join(' ')}
      data-paused-for={props.pausedFor}
      hidden={!shown}
    >
      {props.children}
      <button type="submit" class={props.action === 'cancel' ? 'secondary' : undefined}>
        {props.label}
      </button>
    </form>
  );
}

function Actions(props: { plan: PlanView; revertedBy: string | null }) {
  const { plan } = props;
  const rate = plan.rollout.rate;
  const ratio = plan.rollout.stopOnFailureRatio;
  return (
    <>
      <div class="actions">
        <StatusForm plan={plan} action="pause" label="Pause" pausedFor={PAUSE_ALSO_WHEN} />
        <StatusForm plan={plan} action="resume" label="Resume">
          {plan.schedule ? (
            <label>
              <input type="checkbox" name="ignoreSchedule" value="true" aria-describedby="ignore-schedule-hint" />{' '}
              Resume ignoring the schedule
            </label>
          ) : null}
          {plan.schedule ? (
            <small id="ignore-schedule-hint">
              Runs now, outside the maintenance windows too, to its end: the schedule is dropped. Without it, a resume
              outside every window is refused, naming the next one.
            </small>
          ) : null}
        </StatusForm>
        <StatusForm plan={plan} action="cancel" label="Cancel plan" />
        {props.revertedBy ? null : <StatusForm plan={plan} action="revert" label="Revert" />}
      </div>
      <form
        method="post"
        action={`${planPath(plan.id)}/rollout`}
        data-enhance="plan-action"
        data-statuses={ACTION_STATUSES.rollout.join(' ')}
        hidden={!(ACTION_STATUSES.rollout as readonly number[]).includes(plan.status)}
      >
        <fieldset>
          <legend>Rollout</legend>
          <div class="inline-fields">
            <div>
              <label for="rate">Rate (instances per second)</label>
              <input
                id="rate"
                name="rate"
                type="number"
                min="1"
                max="1000000"
                step="any"
                value={rate === null || rate === undefined ? '' : String(rate)}
                aria-describedby="rate-hint"
              />
              <small id="rate-hint">Empty: no limit.</small>
            </div>
            <div>
              <label for="stop-ratio">Stop on failure ratio</label>
              <input
                id="stop-ratio"
                name="stopOnFailureRatio"
                type="number"
                min="0"
                max="1"
                step="any"
                value={ratio === null || ratio === undefined ? '' : String(ratio)}
                aria-describedby="stop-ratio-hint"
              />
              <small id="stop-ratio-hint">0 to 1: pause once failed ÷ finished exceeds it. Empty: never.</small>
            </div>
          </div>
          <button type="submit">Change rollout</button>
        </fieldset>
      </form>
      {props.revertedBy ? <p class="muted">This plan has been reverted; a plan is reverted once.</p> : null}
    </>
  );
}

function JobLog(props: { job: JobView }) {
  const { log } = props.job;
  if (log.length === 0) return <span class="muted">No entries</span>;
  return (
    <details>
      <summary>{plural(log.length, 'entry', 'entries')}</summary>
      <ul>
        {log.map((e) => (
          <li class="wrap">
            <strong>{LOG_LEVEL_LABELS[e.logLevel] ?? String(e.logLevel)}</strong> {e.message}{' '}
            <small class="muted">
              <Time iso={e.timestamp} />
              {e.eventName ? ` · ${e.eventName}` : ''}
            </small>
          </li>
        ))}
      </ul>
    </details>
  );
}

function Jobs(props: {
  plan: PlanView;
  view: string;
  after: string | undefined;
  jobs: JobView[];
  nextCursor: string | null;
}) {
  const { plan, view } = props;
  const counts: Record<string, number> = {
    all: plan.jobCounts.total,
    failed: plan.jobCounts.failed,
    completed: plan.jobCounts.completed,
    pending: plan.jobCounts.pending,
    cancelled: plan.jobCounts.cancelled,
  };
  const link = (v: string, after?: string) =>
    `${planPath(plan.id)}?jobs=${v}${after ? `&after=${encodeURIComponent(after)}` : ''}#jobs`;
  return (
    <section aria-labelledby="jobs">
      <h2 id="jobs" tabindex={-1}>
        Jobs
      </h2>
      <nav aria-label="Jobs by status">
        <ul class="pager">
          {Object.entries(JOB_FILTERS).map(([v, f]) => (
            <li>
              <a href={link(v)} aria-current={v === view ? 'page' : undefined}>
                {`${f.label} (${count(counts[v] ?? 0)})`}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      {props.jobs.length === 0 ? (
        <p>
          {plan.jobCounts.total === 0 && !isFinished(plan.status)
            ? 'No jobs yet: they are made when the plan starts.'
            : view === 'all'
              ? 'This plan has no jobs: its filter matched no instance.'
              : `No ${JOB_FILTERS[view]!.label.toLowerCase()} jobs${props.after ? ' on this page' : ''}.`}
        </p>
      ) : (
        <Scroll
          label={`${JOB_FILTERS[view]!.label === 'All jobs' ? 'Jobs' : `${JOB_FILTERS[view]!.label} jobs`} of the plan`}
        >
          <table>
            <thead>
              <tr>
                <th scope="col">Instance</th>
                <th scope="col">Status</th>
                <th scope="col">Log</th>
                <th scope="col">Finished</th>
              </tr>
            </thead>
            <tbody>
              {props.jobs.map((j) => (
                <tr>
                  <th scope="row">
                    <a href={`/console/instances/${encodeURIComponent(j.workflowInstanceId)}`}>
                      {j.workflowInstanceId}
                    </a>
                  </th>
                  <td>{JOB_STATUS_LABELS[j.status] ?? String(j.status)}</td>
                  <td>
                    <JobLog job={j} />
                  </td>
                  <td>
                    <Time iso={j.completedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <nav class="pager" aria-label="Pages of jobs">
        {props.after ? <a href={link(view)}>First jobs</a> : null}
        {props.nextCursor ? <a href={link(view, props.nextCursor)}>Next jobs</a> : null}
      </nav>
    </section>
  );
}

/** What the plan's Approval section needs besides the plan: the preview, and what the user may do. */
interface ApprovalView {
  mayDecide: boolean;
  approvePermission: string;
  /** Why four eyes refuse the signed-in user the decision (null: they may decide). */
  submitter: string | null;
  /** What the plan would do now (only while it awaits approval). */
  preview: { matchedCount: number; items: PreviewItem[] } | undefined;
}

/** The plan's approval (section 10): its state and who, when and why; while it waits, the decision. */
function ApprovalSection(props: { plan: PlanView; view: ApprovalView }) {
  const { plan, view } = props;
  const waiting = plan.status === PLAN_STATUS.AwaitingApproval;
  return (
    <section aria-labelledby="approval-heading">
      <h2 id="approval-heading">Approval</h2>
      <dl class="facts">
        <ApprovalFacts approval={plan.approval!} />
      </dl>
      {waiting && view.preview ? (
        <PreviewResult preview={view.preview} id="approval-preview" heading="What it would do now" level={3} />
      ) : null}
      {!waiting ? null : !view.mayDecide ? (
        <NotAllowed what="approve or reject plans" permission={view.approvePermission} />
      ) : (
        <>
          {view.submitter ? <SubmitterNote refusal={view.submitter} /> : null}
          <DecisionForm planId={plan.id} status={plan.status} slot="plan" back="plan" />
        </>
      )}
    </section>
  );
}

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
          <dt>Resumes at</dt>
          <dd data-field="resumesAt">
            <Time iso={plan.resumesAt} />
          </dd>
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
          <dt>Created</dt>
          <dd>
            <Time iso={plan.createdAt} />
          </dd>
          <dt>Started</dt>
          <dd>
            <Time iso={plan.startedAt} />
          </dd>
          <dt>Finished</dt>
          <dd data-field="completedAt">
            <Time iso={plan.completedAt} />
          </dd>
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
  app.get('/plans/:planId', async (c) => {
    const planId = c.req.param('planId');
    if (!may(c, ALTERATIONS_VIEW)) {
      return renderPage(
        c,
        <Layout shell={shell(c)} title="Plan" nav="plans">
          <h1>Plan</h1>
          <NotAllowed what="see plans" permission={permissionName(c, ALTERATIONS_VIEW)} />
        </Layout>,
        403,
      );
    }
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
