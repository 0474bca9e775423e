import { mayReadInstances } from '../../api/authorize.js';
import { type Context, Hono } from 'hono';
import type { Child } from 'hono/jsx';
import { PLAN_STATUS } from '../../alterations/model.js';
import { getPlanView, listPlans } from '../../alterations/plans.js';
import { previewShown, previewStoredPlan } from '../../alterations/preview.js';
import type { PlanView, PreviewItem } from '../../alterations/views.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import { decidePlanCommand } from '../../api/plan-commands.js';
import { DecisionSchema } from '../../alterations/requests.js';
import { ALTERATIONS_APPROVE, ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import { ValidationError, zodFieldErrors } from '../../errors.js';
import { planSummary } from '../../alterations/summary.js';
import { NotAllowed, Notice, Pager, TimeFact } from '../components.js';
import { field, readForm } from '../form.js';
import { planStatusLabel } from '../format.js';
import {
  ApprovalFacts,
  DecisionForm,
  fourEyesNote,
  PreviewResult,
  ScheduleFacts,
  SubmitterNote,
} from '../governance.js';
import { Layout, renderPage } from '../layout.js';
import { may, permissionName, requirePermission, type ShellOf } from '../shell.js';

/** Plans a page of Approvals shows, each with a preview (a count and a computation per plan: kept small). */
const PAGE_SIZE = 10;
/** Instances each plan's preview shows (the plan's page shows 10). */
const PREVIEW_LIMIT = 5;

const planPath = (id: string) => `/console/plans/${encodeURIComponent(id)}`;

/** What a decision did, said afterwards on Approvals or on the plan's page (`?notice=`). */
export const DECISION_NOTICES = {
  approved: 'Approved: the plan goes on as if just submitted (its rollout and schedule apply from now).',
  rejected: 'Rejected: the plan is cancelled and no job ran.',
} as const;

interface Entry {
  plan: PlanView;
  preview: { matchedCount: number; items: PreviewItem[] };
  /** Why four eyes refuse the signed-in user the decision (null: they may decide). */
  submitter: string | null;
}

function ApprovalEntry(props: { entry: Entry; index: number; mayDecide: boolean; approvePermission: string }) {
  const { plan, preview } = props.entry;
  const slot = String(props.index);
  return (
    <article aria-labelledby={`plan-${slot}-heading`} data-scope="plan">
      <header>
        <h2 id={`plan-${slot}-heading`}>
          <a href={planPath(plan.id)}>{plan.id}</a>
        </h2>
        <p class="wrap">
          {planSummary({ alterations: plan.alterations, filter: plan.workflowInstanceFilter, revertOf: plan.revertOf })}
        </p>
      </header>
      <dl class="facts">
        <dt>Status</dt>
        <dd>{planStatusLabel(plan.status)}</dd>
        <TimeFact term="Submitted" iso={plan.createdAt} />
        {plan.approval ? <ApprovalFacts approval={plan.approval} /> : null}
        <ScheduleFacts schedule={plan.schedule} />
      </dl>
      <PreviewResult preview={preview} id={`preview-${slot}`} heading={`Preview of ${plan.id}`} level={3} />
      <p class="problem" data-say="problem" role="alert" hidden></p>
      {!props.mayDecide ? (
        <NotAllowed what="approve or reject plans" permission={props.approvePermission} />
      ) : (
        <>
          {props.entry.submitter ? <SubmitterNote refusal={props.entry.submitter} /> : null}
          <DecisionForm planId={plan.id} status={plan.status} slot={slot} back="approvals" />
        </>
      )}
    </article>
  );
}

/**
 * Approvals (contract sections 10 and 11): the plans awaiting approval, as `GET /alterations?status=8`
 * lists them, each with who asked, what it matched then, until when it waits, its schedule and a preview of
 * what it would do now (`GET /alterations/{planId}/preview`'s computation); and the decision, approve or
 * reject with a comment, which is `POST /alterations/{planId}/approve|reject`'s command after its
 * permission check (`alterations:approve`), four eyes included.
 */
export function approvalsRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/approvals', async (c) => {
    const frame = (body: Child, status: 200 | 403 = 200) =>
      renderPage(
        c,
        <Layout shell={shell(c)} title="Approvals" nav="approvals">
          <h1>Approvals</h1>
          <Notice text={noticeOf(c)} />
          <p id="problem" class="problem" role="alert" hidden></p>
          {body}
        </Layout>,
        status,
      );
    if (!may(c, ALTERATIONS_VIEW))
      return frame(<NotAllowed what="see plans" permission={permissionName(c, ALTERATIONS_VIEW)} />, 403);
    const { pool, tokens, definitions } = c.get('deps');
    const tenant = callerTenant(c);
    const after = c.req.query('after') || undefined;
    const page = await listPlans(pool, tenant, {
      status: PLAN_STATUS.AwaitingApproval,
      after: after === undefined ? undefined : openCursor(tokens.key, after),
      limit: PAGE_SIZE,
    });
    // One after the other: a request holds at most one connection at a time (its tenant's share).
    const entries: Entry[] = [];
    for (const summary of page.items) {
      const plan = await getPlanView(pool, tenant, summary.id);
      const preview = previewShown(
        await previewStoredPlan({ pool, definitions }, tenant, plan, PREVIEW_LIMIT, c.req.raw.signal),
        mayReadInstances(c),
      );
      const submitter = plan.approval ? await fourEyesNote(pool, c.get('principal'), plan.approval) : null;
      entries.push({ plan, preview, submitter });
    }
    const next = sealCursor(tokens.key, page.nextCursor);
    if (entries.length === 0)
      return frame(
        <>
          <p>Nothing is awaiting approval.</p>
          {after ? (
            <p>
              <a href="/console/approvals">First plans awaiting approval</a>
            </p>
          ) : null}
        </>,
      );
    const mayDecide = may(c, ALTERATIONS_APPROVE);
    return frame(
      <>
        <p>
          {`Newest first. A plan waits here until someone other than its submitter approves or rejects it, its submitter withdraws it (Cancel plan on its page), or it expires.`}
        </p>
        {entries.map((entry, i) => (
          <ApprovalEntry
            entry={entry}
            index={i}
            mayDecide={mayDecide}
            approvePermission={permissionName(c, ALTERATIONS_APPROVE)}
          />
        ))}
        <Pager
          of={{
            noun: 'plans awaiting approval',
            first: 'First plans awaiting approval',
            next: 'More plans awaiting approval',
          }}
          link={(a) => (a ? `/console/approvals?after=${encodeURIComponent(a)}` : '/console/approvals')}
          after={after}
          next={next}
        />
      </>,
    );
  });

  for (const decision of ['approve', 'reject'] as const) {
    app.post(`/plans/:planId/${decision}`, async (c) => {
      requirePermission(c, ALTERATIONS_APPROVE);
      const form = await readForm(c);
      const parsed = DecisionSchema.safeParse({ comment: field(form, 'comment') || null });
      if (!parsed.success)
        throw new ValidationError('The decision is not valid; see errors', zodFieldErrors(parsed.error));
      const { planId } = await decidePlanCommand(
        c.get('deps'),
        c.get('principal'),
        c.req.param('planId'),
        decision,
        parsed.data.comment ?? null,
      );
      const notice = decision === 'approve' ? 'approved' : 'rejected';
      const location =
        field(form, 'back') === 'approvals'
          ? `/console/approvals?notice=${notice}&plan=${encodeURIComponent(planId)}`
          : `${planPath(planId)}?notice=${notice}`;
      if ((c.req.header('accept') ?? '').includes('application/json'))
        return c.json({ notice: DECISION_NOTICES[notice], location }, 200);
      return c.redirect(location, 303);
    });
  }
  return app;
}

/** Approvals' notice after a decision: which plan, and what came of it. */
function noticeOf(c: Context<AppEnv>): string | undefined {
  const notice = c.req.query('notice');
  const plan = c.req.query('plan');
  if (notice !== 'approved' && notice !== 'rejected') return undefined;
  return `${plan ? `Plan ${plan}: ` : ''}${DECISION_NOTICES[notice]}`;
}
