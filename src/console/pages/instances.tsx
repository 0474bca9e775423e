import { Hono } from 'hono';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { openCursor, sealCursor } from '../../api/cursor.js';
import { ALTERATIONS_EXECUTE, DEFINITIONS_VIEW, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { listLatestDefinitions } from '../../engine/definitions.js';
import { listInstances } from '../../engine/instance-list.js';
import {
  INSTANCE_STATUSES,
  INSTANCE_SUB_STATUSES,
  type InstanceStatus,
  type InstanceSubStatus,
} from '../../engine/instance-state.js';
import type { InstanceSummary } from '../../engine/instance-views.js';
import { ValidationError } from '../../errors.js';
import { NotAllowed, Pager, Select, Table, Time } from '../components.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { may, permissionName, type ShellOf } from '../shell.js';

const PAGE_SIZE = 50;
/** Past this many definitions the filter takes a typed id instead of offering a list. */
const DEFINITION_CHOICES = 500;

/** Instances are for those who may see them. */
const ACCESS: PageAccess = { title: 'Instances', nav: 'instances', what: 'see instances', permission: INSTANCES_VIEW };

interface Query {
  definitionId: string;
  status: string;
  subStatus: string;
  correlationId: string;
  searchTerm: string;
  /** An incident group's instances: an incident at this activity whose message holds this text. */
  incidentActivityId: string;
  incidentMessage: string;
}

const FILTER_KEYS = [
  'definitionId',
  'status',
  'subStatus',
  'correlationId',
  'searchTerm',
  'incidentActivityId',
  'incidentMessage',
] as const;

function readQuery(get: (k: string) => string | undefined): Query {
  const q = Object.fromEntries(FILTER_KEYS.map((k) => [k, (get(k) ?? '').trim()])) as unknown as Query;
  if (q.status && !(INSTANCE_STATUSES as readonly string[]).includes(q.status))
    throw new ValidationError('Unknown status', [{ path: '/query/status', message: 'Not an instance status' }]);
  if (q.subStatus && !(INSTANCE_SUB_STATUSES as readonly string[]).includes(q.subStatus))
    throw new ValidationError('Unknown sub-status', [{ path: '/query/subStatus', message: 'Not a sub-status' }]);
  return q;
}

const queryString = (q: Query, extra: Record<string, string> = {}) => {
  const params = new URLSearchParams();
  for (const k of FILTER_KEYS) if (q[k]) params.set(k, q[k]);
  for (const [k, v] of Object.entries(extra)) params.set(k, v);
  const s = params.toString();
  return s ? `?${s}` : '';
};

function InstancesPage(props: {
  shell: Shell;
  query: Query;
  after: string | undefined;
  items: InstanceSummary[];
  nextCursor: string | null;
  definitions: { id: string; name: string | null }[] | undefined;
  canAlter: boolean;
  alterPermission: string;
}) {
  const { query: q, definitions } = props;
  const names = new Map((definitions ?? []).map((d) => [d.id, d.name]));
  const filtered = FILTER_KEYS.some((k) => q[k]);
  return (
    <Layout shell={props.shell} title="Instances" nav="instances">
      <h1>Instances</h1>
      <form method="get" action="/console/instances" aria-label="Filter instances">
        <div class="inline-fields">
          {definitions ? (
            <Select
              id="definitionId"
              label="Definition"
              value={q.definitionId}
              any="Any definition"
              choices={definitions.map((d) => ({ value: d.id, label: d.name ? `${d.name} (${d.id})` : d.id }))}
            />
          ) : (
            <div>
              <label for="definitionId">Definition</label>
              <input id="definitionId" name="definitionId" value={q.definitionId} />
            </div>
          )}
          <Select id="status" label="Status" value={q.status} choices={INSTANCE_STATUSES} any="Any status" />
          <Select
            id="subStatus"
            label="Sub-status"
            value={q.subStatus}
            choices={INSTANCE_SUB_STATUSES}
            any="Any sub-status"
          />
          <div>
            <label for="correlationId">Correlation id</label>
            <input id="correlationId" name="correlationId" value={q.correlationId} />
          </div>
          <div>
            <label for="searchTerm">Search term</label>
            <input id="searchTerm" name="searchTerm" type="search" value={q.searchTerm} />
          </div>
          <div>
            <label for="incidentActivityId">Incident at activity</label>
            <input id="incidentActivityId" name="incidentActivityId" value={q.incidentActivityId} />
          </div>
          <div>
            <label for="incidentMessage">Incident message contains</label>
            <input id="incidentMessage" name="incidentMessage" value={q.incidentMessage} />
          </div>
        </div>
        <button type="submit">Show</button>
      </form>
      {props.canAlter ? (
        <p>
          <a href={`/console/new-plan${queryString(q, { from: 'instances' })}`} class="button-link">
            Alter these
          </a>{' '}
          <small class="muted">
            {filtered
              ? 'A new plan with this filter: every instance it matches when the plan runs.'
              : 'A new plan for every instance (no filter is set).'}
          </small>
        </p>
      ) : (
        <NotAllowed what="alter instances" permission={props.alterPermission} />
      )}
      <Table
        label="Instances, newest first"
        columns={['Instance', 'Definition', 'Status', 'Correlation id', 'Incidents', 'Created']}
        rows={props.items}
        empty={
          <p>
            {props.after ? 'No more instances.' : filtered ? 'No instance matches this filter.' : 'No instances yet.'}
          </p>
        }
        head={(i) => (
          <>
            <a href={`/console/instances/${encodeURIComponent(i.id)}`}>{i.name ?? i.id}</a>
            {i.name ? (
              <>
                <br />
                <small class="muted">{i.id}</small>
              </>
            ) : null}
          </>
        )}
        cells={(i) => (
          <>
            <td>
              {names.get(i.definitionId) ? (
                <>
                  {names.get(i.definitionId)}
                  <br />
                </>
              ) : null}
              <small class="muted">{`${i.definitionId} v${i.version}`}</small>
            </td>
            <td>{`${i.status} / ${i.subStatus}`}</td>
            <td>{i.correlationId ?? ''}</td>
            <td>{String(i.incidentCount)}</td>
            <td>
              <Time iso={i.createdAt} />
            </td>
          </>
        )}
      />
      <Pager
        of={{ noun: 'instances', first: 'Newest instances', next: 'Older instances' }}
        link={(after) => `/console/instances${queryString(q, after ? { after } : {})}`}
        after={props.after}
        next={props.nextCursor}
      />
    </Layout>
  );
}

/** Instances: the API's list (its filters, newest first, paged), and "Alter these" into New plan. */
export function instancesRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/instances', gate(shell, ACCESS), async (c) => {
    const { pool, tokens } = c.get('deps');
    const tenant = callerTenant(c);
    const q = readQuery((k) => c.req.query(k));
    const after = c.req.query('after') || undefined;
    const page = await listInstances(pool, tenant, {
      definitionId: q.definitionId || undefined,
      status: (q.status || undefined) as InstanceStatus | undefined,
      subStatus: (q.subStatus || undefined) as InstanceSubStatus | undefined,
      correlationId: q.correlationId || undefined,
      searchTerm: q.searchTerm || undefined,
      incident:
        q.incidentActivityId || q.incidentMessage
          ? { activityId: q.incidentActivityId || null, messageContains: q.incidentMessage || null }
          : undefined,
      after: after === undefined ? undefined : openCursor(tokens.key, after),
      limit: PAGE_SIZE,
    });
    let definitions: { id: string; name: string | null }[] | undefined;
    if (may(c, DEFINITIONS_VIEW)) {
      const defs = await listLatestDefinitions(pool, tenant, { limit: DEFINITION_CHOICES });
      if (defs.totalCount <= DEFINITION_CHOICES)
        definitions = defs.items.map((d) => ({ id: d.definitionId, name: d.name }));
    }
    return renderPage(
      c,
      <InstancesPage
        shell={shell(c)}
        query={q}
        after={after}
        items={page.items}
        nextCursor={sealCursor(tokens.key, page.nextCursor)}
        definitions={definitions}
        canAlter={may(c, ALTERATIONS_EXECUTE)}
        alterPermission={permissionName(c, ALTERATIONS_EXECUTE)}
      />,
    );
  });
  return app;
}
