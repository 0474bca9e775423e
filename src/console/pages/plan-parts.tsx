import { type Context } from 'hono';
import type { Child } from 'hono/jsx';
import { isFinished, JOB_STATUS, type JobStatus, PLAN_STATUS } from '../../alterations/model.js';
import type { JobView, PlanView, PreviewItem } from '../../alterations/views.js';
import { type AppEnv } from '../../api/context.js';
import { NotAllowed, Pager, Table, Time } from '../components.js';
import { ACTION_STATUSES, count, JOB_STATUS_LABELS, LOG_LEVEL_LABELS, PAUSE_ALSO_WHEN, plural } from '../format.js';
import { ApprovalFacts, DecisionForm, PreviewResult, SubmitterNote } from '../governance.js';
import { DECISION_NOTICES } from './approvals.js';

/** The parts of a plan's page: its steering forms, its jobs, its approval. */

export const JOBS_PAGE = 50;

/** The job views a plan page offers: all jobs, or those of one status (the failed ones on their own). */
export const JOB_FILTERS: Record<string, { label: string; status?: JobStatus }> = {
  all: { label: 'All jobs' },
  failed: { label: 'Failed', status: JOB_STATUS.Failed },
  completed: { label: 'Completed', status: JOB_STATUS.Completed },
  pending: { label: 'Pending', status: JOB_STATUS.Pending },
  cancelled: { label: 'Cancelled', status: JOB_STATUS.Cancelled },
  skipped: { label: 'Skipped', status: JOB_STATUS.Skipped },
};

/** What an action did, said on the plan's page afterwards (`?notice=`). */
export const NOTICES: Record<string, string> = {
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
export function temporalLink(c: Context<AppEnv>, planId: string): string | undefined {
  const { temporal } = c.get('deps').config;
  const base =
    temporal.uiUrl ?? (!temporal.address && temporal.uiPort > 0 ? `http://localhost:${temporal.uiPort}` : undefined);
  if (!base) return undefined;
  return `${base}/namespaces/${encodeURIComponent(temporal.namespace)}/workflows/${encodeURIComponent(`alteration-plan-${planId}`)}`;
}

export const planPath = (id: string) => `/console/plans/${encodeURIComponent(id)}`;
export const done = (p: PlanView) =>
  p.jobCounts.completed + p.jobCounts.failed + p.jobCounts.cancelled + p.jobCounts.skipped;

export function StatusForm(props: {
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

/** The rollout controls a running plan's page may change: each a number input, empty for none. */
const ROLLOUT_INPUTS = [
  {
    id: 'rate',
    name: 'rate',
    label: 'Rate (instances per second)',
    min: '1',
    max: '1000000',
    hint: 'Empty: no limit.',
  },
  {
    id: 'stop-ratio',
    name: 'stopOnFailureRatio',
    label: 'Stop on failure ratio',
    min: '0',
    max: '1',
    hint: '0 to 1: pause once failed ÷ finished exceeds it. Empty: never.',
  },
] as const;

export function Actions(props: { plan: PlanView; revertedBy: string | null }) {
  const { plan } = props;
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
            {ROLLOUT_INPUTS.map((f) => {
              const v = plan.rollout[f.name];
              return (
                <div>
                  <label for={f.id}>{f.label}</label>
                  <input
                    id={f.id}
                    name={f.name}
                    type="number"
                    min={f.min}
                    max={f.max}
                    step="any"
                    value={v === null || v === undefined ? '' : String(v)}
                    aria-describedby={`${f.id}-hint`}
                  />
                  <small id={`${f.id}-hint`}>{f.hint}</small>
                </div>
              );
            })}
          </div>
          <button type="submit">Change rollout</button>
        </fieldset>
      </form>
      {props.revertedBy ? <p class="muted">This plan has been reverted; a plan is reverted once.</p> : null}
    </>
  );
}

export function JobLog(props: { job: JobView }) {
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

export function Jobs(props: {
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
    skipped: plan.jobCounts.skipped,
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
      <Table
        label={`${JOB_FILTERS[view]!.label === 'All jobs' ? 'Jobs' : `${JOB_FILTERS[view]!.label} jobs`} of the plan`}
        columns={['Instance', 'Status', 'Log', 'Finished']}
        rows={props.jobs}
        empty={
          <p>
            {plan.jobCounts.total === 0 && !isFinished(plan.status)
              ? 'No jobs yet: they are made when the plan starts.'
              : view === 'all'
                ? 'This plan has no jobs: its filter matched no instance.'
                : `No ${JOB_FILTERS[view]!.label.toLowerCase()} jobs${props.after ? ' on this page' : ''}.`}
          </p>
        }
        head={(j) => (
          <a href={`/console/instances/${encodeURIComponent(j.workflowInstanceId)}`}>{j.workflowInstanceId}</a>
        )}
        cells={(j) => (
          <>
            <td>
              {JOB_STATUS_LABELS[j.status] ?? String(j.status)}
              {j.verification ? <small class="muted">{` · ${j.verification}`}</small> : null}
            </td>
            <td>
              <JobLog job={j} />
            </td>
            <td>
              <Time iso={j.completedAt} />
            </td>
          </>
        )}
      />
      <Pager
        of={{ noun: 'jobs', first: 'First jobs', next: 'Next jobs' }}
        link={(after) => link(view, after)}
        after={props.after}
        next={props.nextCursor}
      />
    </section>
  );
}

/** What the plan's Approval section needs besides the plan: the preview, and what the user may do. */
export interface ApprovalView {
  mayDecide: boolean;
  approvePermission: string;
  /** Why four eyes refuse the signed-in user the decision (null: they may decide). */
  submitter: string | null;
  /** What the plan would do now (only while it awaits approval). */
  preview: { matchedCount: number; items: PreviewItem[] } | undefined;
}

/** The plan's approval (section 10): its state and who, when and why; while it waits, the decision. */
export function ApprovalSection(props: { plan: PlanView; view: ApprovalView }) {
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
