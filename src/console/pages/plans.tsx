import { type Context, Hono } from 'hono';
import { listPlans } from '../../alterations/plans.js';
import type { PlanSummaryView } from '../../alterations/views.js';
import type { PlanStatus } from '../../alterations/model.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import { ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import { ValidationError } from '../../errors.js';
import { Pager, Select, Table, Time } from '../components.js';
import { count, PLAN_STATUS_CHOICES, PLAN_STATUS_LABELS, planStatusLabel } from '../format.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { may, type ShellOf } from '../shell.js';

const PAGE_SIZE = 25;

/** Plans are for those who may see them. */
const ACCESS: PageAccess = { title: 'Plans', nav: 'plans', what: 'see plans', permission: ALTERATIONS_VIEW };

/** The Plans list's query: a status (by number) and a cursor. */
function readQuery(c: { req: { query(name: string): string | undefined } }) {
  const raw = c.req.query('status') ?? '';
  let status: number | undefined;
  if (raw !== '') {
    status = Number(raw);
    if (!Number.isInteger(status) || !(status in PLAN_STATUS_LABELS))
      throw new ValidationError('Unknown plan status', [{ path: '/query/status', message: 'Not a plan status' }]);
  }
  const after = c.req.query('after') || undefined;
  return { status, after };
}

async function readPage(c: Context<AppEnv>, q: ReturnType<typeof readQuery>) {
  const { pool, tokens } = c.get('deps');
  const after = q.after === undefined ? undefined : openCursor(tokens.key, q.after);
  const page = await listPlans(pool, callerTenant(c), {
    status: q.status as PlanStatus | undefined,
    after,
    limit: PAGE_SIZE,
  });
  return { items: page.items, nextCursor: sealCursor(tokens.key, page.nextCursor) };
}

/** What the live poll sends for one plan: the cells of its row that change. */
export function liveRow(p: PlanSummaryView) {
  const c = p.jobCounts;
  return {
    id: p.id,
    status: p.status,
    statusLabel: planStatusLabel(p.status),
    progress: `${count(c.completed + c.failed + c.cancelled + c.skipped)} / ${count(c.total)}`,
    failed: count(c.failed),
  };
}

function query(status: number | undefined, after?: string) {
  const q = new URLSearchParams();
  if (status !== undefined) q.set('status', String(status));
  if (after) q.set('after', after);
  const s = q.toString();
  return s ? `?${s}` : '';
}

function PlansPage(props: {
  shell: Shell;
  status: number | undefined;
  after: string | undefined;
  items: PlanSummaryView[];
  nextCursor: string | null;
}) {
  const { status, items } = props;
  return (
    <Layout shell={props.shell} title="Plans" nav="plans">
      <h1>Plans</h1>
      <form method="get" action="/console/plans" class="actions" aria-label="Filter plans">
        <Select
          id="status"
          label="Status"
          value={status === undefined ? '' : String(status)}
          choices={PLAN_STATUS_CHOICES.map((s) => ({ value: String(s.value), label: s.label }))}
          any="All statuses"
        />
        <button type="submit">Show</button>
      </form>
      <p id="list-changed" class="notice" role="status" hidden>
        <span>The list has changed.</span> <a href={`/console/plans${query(status)}`}>Show the latest plans</a>
      </p>
      <Table
        label="Plans, newest first"
        columns={['Plan', 'Status', 'Jobs done', 'Failed', 'Alterations', 'Created']}
        rows={items}
        empty={
          <p>
            {props.after
              ? 'No more plans.'
              : status === undefined
                ? 'No plans yet. '
                : `No plan is ${planStatusLabel(status)}. `}
            {props.after ? null : <a href="/console/new-plan">Make a new plan</a>}
          </p>
        }
        tableAttrs={{ 'data-live-url': `/console/live/plans${query(status, props.after)}` }}
        rowAttrs={(p) => ({ 'data-plan-id': p.id })}
        head={(p) => (
          <>
            <a href={`/console/plans/${encodeURIComponent(p.id)}`}>{p.id}</a>
            {p.revertOf ? <small class="muted"> (reverts {p.revertOf})</small> : null}
          </>
        )}
        cells={(p) => {
          const row = liveRow(p);
          return (
            <>
              <td data-cell="statusLabel">{row.statusLabel}</td>
              <td data-cell="progress" class="nowrap">
                {row.progress}
              </td>
              <td data-cell="failed">{row.failed}</td>
              <td>{p.revertOf ? 'Revert' : p.alterationTypes.join(', ')}</td>
              <td>
                <Time iso={p.createdAt} />
              </td>
            </>
          );
        }}
      />
      <Pager
        of={{ noun: 'plans', first: 'Newest plans', next: 'Older plans' }}
        link={(after) => `/console/plans${query(status, after)}`}
        after={props.after}
        next={props.nextCursor}
      />
    </Layout>
  );
}

/** Plans: newest first, by status, live (the script polls `/console/live/plans` every 2 s). */
export function plansRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/plans', gate(shell, ACCESS), async (c) => {
    const q = readQuery(c);
    const page = await readPage(c, q);
    return renderPage(
      c,
      <PlansPage shell={shell(c)} status={q.status} after={q.after} items={page.items} nextCursor={page.nextCursor} />,
    );
  });
  app.get('/live/plans', async (c) => {
    if (!may(c, ALTERATIONS_VIEW)) return c.json({ items: [] as ReturnType<typeof liveRow>[] }, 200);
    const page = await readPage(c, readQuery(c));
    c.header('cache-control', 'no-store');
    return c.json({ items: page.items.map(liveRow) }, 200);
  });
  return app;
}
