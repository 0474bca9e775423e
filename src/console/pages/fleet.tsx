import { type Context, Hono } from 'hono';
import { listPlans } from '../../alterations/plans.js';
import type { PlanSummaryView } from '../../alterations/views.js';
import { PLAN_STATUS } from '../../alterations/model.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import { ALTERATIONS_EXECUTE, ALTERATIONS_VIEW, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { INSTANCE_SUB_STATUSES } from '../../engine/instance-state.js';
import type { IncidentGroup } from '../../engine/instance-views.js';
import { listIncidentGroups, unfinishedCounts } from '../../engine/incident-groups.js';
import { NotAllowed, Pager, Table, Time } from '../components.js';
import { count, planStatusLabel } from '../format.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { planPath } from './plan-parts.js';
import { may, permissionName, type ShellOf } from '../shell.js';

/**
 * The fleet at a glance (contract section 12, "In the console"): the Dashboard, the first page after signing in
 * (unfinished instances per definition by sub-status, the largest incident groups, the plans that need an eye),
 * and Incidents (every group, each with `Retry these`).
 */

const UNFINISHED = INSTANCE_SUB_STATUSES.filter((s) => s !== 'Finished' && s !== 'Cancelled');
const DASHBOARD_GROUPS = 5;
const DASHBOARD_PLANS = 10;
const INCIDENTS_PAGE = 25;

const INCIDENTS: PageAccess = {
  title: 'Incidents',
  nav: 'incidents',
  what: 'see incidents',
  permission: INSTANCES_VIEW,
};

export const instancesPath = (definitionId: string, subStatus?: string) =>
  `/console/instances?${new URLSearchParams({ definitionId, ...(subStatus ? { subStatus } : {}) })}`;

/**
 * `Retry these`: New plan over the group's instances (its definition, an incident at its activity whose message
 * holds the group's), scheduling the faulted activity again, and verifying that no incident is left within 5
 * minutes. A form of its own (GET), so it is a button that works without script.
 */
export function RetryTheseForm(props: { group: IncidentGroup; label?: string }) {
  const g = props.group;
  return (
    <form method="get" action="/console/new-plan" class="inline">
      <input type="hidden" name="from" value="incidents" />
      <input type="hidden" name="definitionId" value={g.definitionId} />
      <input type="hidden" name="incidentActivityId" value={g.activityId} />
      <input type="hidden" name="incidentMessage" value={g.message} />
      <button type="submit" class="secondary" aria-describedby={props.label}>
        Retry these
      </button>
    </form>
  );
}

function IncidentTable(props: { groups: readonly IncidentGroup[]; canAlter: boolean; label: string }) {
  return (
    <Table
      label={props.label}
      columns={['Definition', 'Activity', 'Message', 'Instances', 'First', 'Last', 'Retry']}
      rows={props.groups}
      empty={<p>No instance has an incident.</p>}
      head={(g) => (
        <a href={`/console/definitions/${encodeURIComponent(g.definitionId)}?version=${g.version}`}>
          {`${g.definitionId} v${g.version}`}
        </a>
      )}
      cells={(g) => (
        <>
          <td>{`${g.activityId} (${g.activityType})`}</td>
          <td class="wrap" id={`group-${props.groups.indexOf(g)}`}>
            {g.message}
          </td>
          <td>
            <a
              href={`/console/instances?${new URLSearchParams({ definitionId: g.definitionId, incidentActivityId: g.activityId, incidentMessage: g.message })}`}
            >
              {count(g.count)}
            </a>
          </td>
          <td>
            <Time iso={g.firstAt} />
          </td>
          <td>
            <Time iso={g.lastAt} />
          </td>
          <td>{props.canAlter ? <RetryTheseForm group={g} label={`group-${props.groups.indexOf(g)}`} /> : null}</td>
        </>
      )}
    />
  );
}

function PlanList(props: { plans: readonly PlanSummaryView[]; empty: string }) {
  if (props.plans.length === 0) return <p class="muted">{props.empty}</p>;
  return (
    <ul>
      {props.plans.map((p) => (
        <li>
          <a href={planPath(p.id)}>{p.id}</a>
          {` · ${planStatusLabel(p.status)} · ${count(p.jobCounts.total - p.jobCounts.pending)} of ${count(p.jobCounts.total)} jobs done`}
        </li>
      ))}
    </ul>
  );
}

interface DashboardData {
  unfinished?: { definitionId: string; bySubStatus: Record<string, number> }[];
  groups?: IncidentGroup[];
  moreGroups?: boolean;
  plans?: { running: PlanSummaryView[]; paused: PlanSummaryView[]; awaiting: PlanSummaryView[] };
}

/**
 * The plans running, paused and awaiting approval: the Dashboard's live part (the script fetches it again every 5
 * s from `/console/live/dashboard-plans`; three reads by index, as cheap as the Plans list's own poll).
 */
function PlansSection(props: { plans: DashboardData['plans']; missing: string }) {
  return (
    <section aria-labelledby="plans-heading" data-live-url="/console/live/dashboard-plans">
      <h2 id="plans-heading">Plans</h2>
      {props.plans ? (
        <div class="grid">
          <div>
            <h3>
              <a href={`/console/plans?status=${PLAN_STATUS.Running}`}>Running</a>
            </h3>
            <PlanList plans={props.plans.running} empty="None running." />
          </div>
          <div>
            <h3>
              <a href={`/console/plans?status=${PLAN_STATUS.Paused}`}>Paused</a>
            </h3>
            <PlanList plans={props.plans.paused} empty="None paused." />
          </div>
          <div>
            <h3>
              <a href="/console/approvals">Awaiting approval</a>
            </h3>
            <PlanList plans={props.plans.awaiting} empty="None awaiting approval." />
          </div>
        </div>
      ) : (
        <NotAllowed what="see plans" permission={props.missing} />
      )}
    </section>
  );
}

function DashboardPage(props: {
  shell: Shell;
  data: DashboardData;
  canAlter: boolean;
  missing: Record<string, string>;
}) {
  const { data } = props;
  return (
    <Layout shell={props.shell} title="Dashboard" nav="dashboard">
      <h1>Dashboard</h1>
      <section aria-labelledby="unfinished-heading">
        <h2 id="unfinished-heading">Unfinished instances</h2>
        {data.unfinished ? (
          <Table
            label="Unfinished instances per definition"
            columns={['Definition', ...UNFINISHED]}
            rows={data.unfinished}
            empty={<p>No unfinished instance.</p>}
            head={(d) => <a href={`/console/definitions/${encodeURIComponent(d.definitionId)}`}>{d.definitionId}</a>}
            cells={(d) => (
              <>
                {UNFINISHED.map((s) => (
                  <td>
                    {d.bySubStatus[s] ? <a href={instancesPath(d.definitionId, s)}>{count(d.bySubStatus[s])}</a> : '0'}
                  </td>
                ))}
              </>
            )}
          />
        ) : (
          <NotAllowed what="see instances" permission={props.missing.instances!} />
        )}
      </section>
      <section aria-labelledby="incidents-heading">
        <h2 id="incidents-heading">Open incidents</h2>
        {data.groups ? (
          <>
            <IncidentTable groups={data.groups} canAlter={props.canAlter} label="Largest incident groups" />
            {data.moreGroups ? (
              <p>
                <a href="/console/incidents">Every incident group</a>
              </p>
            ) : null}
          </>
        ) : (
          <NotAllowed what="see incidents" permission={props.missing.instances!} />
        )}
      </section>
      <PlansSection plans={data.plans} missing={props.missing.plans!} />
    </Layout>
  );
}

async function dashboardData(c: Context<AppEnv>): Promise<DashboardData> {
  const { pool } = c.get('deps');
  const tenant = callerTenant(c);
  const data: DashboardData = {};
  // One statement after the other: a console request holds at most one connection (its tenant's share).
  if (may(c, INSTANCES_VIEW)) {
    const byDefinition = new Map<string, Record<string, number>>();
    for (const row of await unfinishedCounts(pool, tenant)) {
      const counts = byDefinition.get(row.definitionId) ?? {};
      counts[row.subStatus] = row.count;
      byDefinition.set(row.definitionId, counts);
    }
    data.unfinished = [...byDefinition].map(([definitionId, bySubStatus]) => ({ definitionId, bySubStatus }));
    const groups = await listIncidentGroups(pool, tenant, { limit: DASHBOARD_GROUPS });
    data.groups = groups.items;
    data.moreGroups = groups.nextCursor !== null;
  }
  data.plans = await dashboardPlans(c);
  return data;
}

async function dashboardPlans(c: Context<AppEnv>): Promise<DashboardData['plans']> {
  if (!may(c, ALTERATIONS_VIEW)) return undefined;
  const { pool } = c.get('deps');
  const tenant = callerTenant(c);
  const of = async (status: number) =>
    (await listPlans(pool, tenant, { status: status as never, limit: DASHBOARD_PLANS })).items;
  return {
    running: await of(PLAN_STATUS.Running),
    paused: await of(PLAN_STATUS.Paused),
    awaiting: await of(PLAN_STATUS.AwaitingApproval),
  };
}

export function fleetRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/dashboard', async (c) => {
    const data = await dashboardData(c);
    return renderPage(
      c,
      <DashboardPage
        shell={shell(c)}
        data={data}
        canAlter={may(c, ALTERATIONS_EXECUTE)}
        missing={{ instances: permissionName(c, INSTANCES_VIEW), plans: permissionName(c, ALTERATIONS_VIEW) }}
      />,
    );
  });

  app.get('/live/dashboard-plans', async (c) => {
    c.header('cache-control', 'no-store');
    return c.html(<PlansSection plans={await dashboardPlans(c)} missing={permissionName(c, ALTERATIONS_VIEW)} />);
  });

  app.get('/incidents', gate(shell, INCIDENTS), async (c) => {
    const { pool, tokens } = c.get('deps');
    const raw = c.req.query('after');
    const after = raw ? openCursor(tokens.key, raw) : undefined;
    const page = await listIncidentGroups(pool, callerTenant(c), { after, limit: INCIDENTS_PAGE });
    const next = sealCursor(tokens.key, page.nextCursor);
    return renderPage(
      c,
      <Layout shell={shell(c)} title="Incidents" nav="incidents">
        <h1>Incidents</h1>
        <p>
          The tenant's instances with incidents, grouped by definition, version, activity and message (its first 200
          characters), largest group first. <strong>Retry these</strong> opens New plan over a group's instances: it
          schedules the faulted activity again and verifies that no incident is left within 5 minutes.
        </p>
        <IncidentTable groups={page.items} canAlter={may(c, ALTERATIONS_EXECUTE)} label="Incident groups" />
        <Pager
          of={{ noun: 'incident groups', first: 'First groups', next: 'More groups' }}
          link={(a) => (a ? `/console/incidents?after=${encodeURIComponent(a)}` : '/console/incidents')}
          after={raw}
          next={next}
        />
      </Layout>,
    );
  });
  return app;
}
