import type { Approval, PrincipalRef } from '../alterations/governance.js';
import { fourEyesRefusal, principalRef } from '../alterations/governance.js';
import type { Schedule } from '../alterations/schedule.js';
import type { PreviewItem } from '../alterations/views.js';
import type { Principal } from '../auth/principal.js';
import type { Queryable } from '../db/pool.js';
import { Table, TimeFact } from './components.js';
import { ACTION_STATUSES, jsonText, LOG_LEVEL_LABELS, plural } from './format.js';

/**
 * What the console shows of plan governance (contract section 10) on a plan's page and on Approvals: the
 * approval (who asked, what matched, until when, who decided, when and why), the schedule, the form that
 * approves or rejects with a comment, and a preview of what the plan would do.
 */

const who = (p: PrincipalRef | null) => (p ? `${p.name} (${p.kind === 'user' ? 'user' : 'API key'})` : '—');

/** The approval as rows of a description list (the plan page's "About", an Approvals entry). */
export function ApprovalFacts(props: { approval: Approval }) {
  const a = props.approval;
  return (
    <>
      <dt>Approval</dt>
      <dd data-field="approvalState">{a.state}</dd>
      <dt>Requested by</dt>
      <dd>{who(a.requestedBy)}</dd>
      <dt>Matched at submission</dt>
      <dd>{plural(a.matchedCount, 'instance')}</dd>
      <TimeFact term={a.state === 'Pending' ? 'Expires' : 'Would have expired'} iso={a.expiresAt} />
      {a.decidedBy || a.decidedAt ? (
        <>
          <dt>Decided by</dt>
          <dd>{a.decidedBy ? who(a.decidedBy) : a.state === 'Withdrawn' ? 'withdrawn by a cancel' : '—'}</dd>
          <TimeFact term="Decided" iso={a.decidedAt} />
        </>
      ) : null}
      {a.comment ? (
        <>
          <dt>Comment</dt>
          <dd class="wrap">{a.comment}</dd>
        </>
      ) : null}
    </>
  );
}

/** A window as people read it: `Mon, Tue 22:00–02:00 Europe/Berlin`. */
const windowText = (w: NonNullable<Schedule['windows']>[number]) =>
  `${w.days.join(', ')} ${w.from}–${w.to}${w.to <= w.from ? ' (past midnight)' : ''} ${w.timeZone}`;

/** The schedule as rows of a description list: not before, the windows. */
export function ScheduleFacts(props: { schedule: Schedule | null }) {
  const s = props.schedule;
  if (!s || (!s.notBefore && !s.windows?.length)) {
    return (
      <>
        <dt>Schedule</dt>
        <dd>none: it may run at any time</dd>
      </>
    );
  }
  return (
    <>
      {s.notBefore ? (
        <>
          <TimeFact term="Not before" iso={s.notBefore} />
        </>
      ) : null}
      {s.windows?.length ? (
        <>
          <dt>Maintenance windows</dt>
          <dd>
            <ul>
              {s.windows.map((w) => (
                <li>{windowText(w)}</li>
              ))}
            </ul>
          </dd>
        </>
      ) : null}
    </>
  );
}

/**
 * Why four eyes refuse the signed-in user the decision (they submitted the plan, or stand on its submitter's
 * creation line: a key or user one made for the other), or null when they may decide. Only to say so before
 * they try; the API decides.
 */
export async function fourEyesNote(db: Queryable, principal: Principal, approval: Approval): Promise<string | null> {
  return (await fourEyesRefusal(db, approval.requestedBy, principalRef(principal))) ?? null;
}

/** What a principal that four eyes refuse reads where the decision would be. */
export function SubmitterNote(props: { refusal: string }) {
  return (
    <p class="muted">
      {props.refusal}: another user with the permission to approve must approve or reject it. Its submitter may withdraw
      it with Cancel plan.
    </p>
  );
}

/**
 * Approve or reject with a comment: one form, two buttons (`Approve`, `Reject`), posted to the plan's
 * approve or reject action (`formaction`). `slot` keeps the ids apart when a page lists several plans;
 * `back` is where the answer leads (the plan's page, or Approvals).
 */
export function DecisionForm(props: { planId: string; status: number; slot: string; back: 'plan' | 'approvals' }) {
  const base = `/console/plans/${encodeURIComponent(props.planId)}`;
  const commentId = `comment-${props.slot}`;
  return (
    <form
      method="post"
      action={`${base}/approve`}
      data-enhance="plan-action"
      data-statuses={ACTION_STATUSES.decide.join(' ')}
      hidden={!(ACTION_STATUSES.decide as readonly number[]).includes(props.status)}
    >
      <input type="hidden" name="back" value={props.back} />
      <label for={commentId}>Comment</label>
      <textarea id={commentId} name="comment" rows={2} maxlength={2000} aria-describedby={`${commentId}-hint`}>
        {''}
      </textarea>
      <small id={`${commentId}-hint`}>Optional: why, for the record (kept with the decision).</small>
      <div class="actions">
        <button type="submit">Approve</button>
        <button type="submit" formaction={`${base}/reject`} class="secondary">
          Reject
        </button>
      </div>
    </form>
  );
}

/**
 * What a plan would do to the first instances it matches (New plan's Preview, a stored plan's preview on
 * Approvals): each instance's outcome, its log and every change, before and after. `id` names the section
 * (its heading's id is `{id}-heading`) so that a page can hold several.
 */
/** Where a preview leaves the values out (the viewer may not read instances). */
const VALUES_HIDDEN = 'Values are shown to those who may read instances (workflows/instances:view)';

/** A preview shows this many instances open; the others fold under a summary. */
const PREVIEW_OPEN = 3;

export function PreviewResult(props: {
  preview: { matchedCount: number; items: PreviewItem[] };
  id?: string;
  heading?: string;
  level?: 2 | 3;
  /** The form whose Submit plan the preview offers again below it (New plan). */
  submitForm?: string;
}) {
  const { preview } = props;
  const succeed = preview.items.filter((i) => i.isSuccessful).length;
  const article = (item: PreviewItem) => <PreviewArticle item={item} />;
  const id = props.id ?? 'preview-result';
  const headingId = props.id ? `${props.id}-heading` : 'preview-heading';
  const heading = props.heading ?? 'Preview';
  return (
    <section aria-labelledby={headingId} id={id} tabindex={-1}>
      {props.level === 3 ? <h3 id={headingId}>{heading}</h3> : <h2 id={headingId}>{heading}</h2>}
      <p role="status">
        {`${plural(preview.matchedCount, 'instance')} match. `}
        {preview.items.length
          ? `Of the first ${preview.items.length}: ${succeed} would succeed, ${preview.items.length - succeed} would fail (computed as the plan runs, nothing written).`
          : ''}
      </p>
      {preview.items.slice(0, PREVIEW_OPEN).map(article)}
      {preview.items.length > PREVIEW_OPEN ? (
        <details>
          <summary>{`The other ${preview.items.length - PREVIEW_OPEN} previewed instances`}</summary>
          {preview.items.slice(PREVIEW_OPEN).map(article)}
        </details>
      ) : null}
      {props.submitForm ? (
        <p>
          <button type="submit" form={props.submitForm} name="action" value="submit">
            Submit plan
          </button>
        </p>
      ) : null}
    </section>
  );
}

/** One previewed instance: whether it would succeed, its log, and each change with its before and after. */
function PreviewArticle({ item }: { item: PreviewItem }) {
  return (
    <article>
      <header>
        <a href={`/console/instances/${encodeURIComponent(item.workflowInstanceId)}`}>{item.workflowInstanceId}</a>
        {' · '}
        <strong>{item.isSuccessful ? 'would succeed' : 'would fail'}</strong>
      </header>
      <ul>
        {item.log.map((e) => (
          <li class="wrap">
            {`${LOG_LEVEL_LABELS[e.logLevel] ?? e.logLevel}: `}
            {e.message}
          </li>
        ))}
      </ul>
      <Table
        label={`Changes to ${item.workflowInstanceId}`}
        columns={['Where', 'Before', 'After']}
        rows={item.changes}
        empty={<p class="muted">No change.</p>}
        head={(ch) => <code>{ch.path}</code>}
        cells={(ch) =>
          'before' in ch ? (
            <>
              <td>
                <code>{jsonText(ch.before)}</code>
              </td>
              <td>
                <code>{jsonText(ch.after)}</code>
              </td>
            </>
          ) : (
            <td colspan={2} class="muted">
              {VALUES_HIDDEN}
            </td>
          )
        }
      />
    </article>
  );
}
