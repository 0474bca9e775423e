import { Hono } from 'hono';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { listInstanceChanges } from '../../alterations/instance-changes.js';
import type { InstanceChange } from '../../alterations/views.js';
import { ALTERATIONS_EXECUTE, ALTERATIONS_VIEW, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { getInstanceView } from '../../engine/instances.js';
import type { InstanceView } from '../../engine/instance-views.js';
import { Table, Time, TimeFact } from '../components.js';
import { JOB_STATUS_LABELS, jsonText } from '../format.js';
import { planPath } from './plan-parts.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { may, type ShellOf } from '../shell.js';

/** The plans that changed the instance, the most recent this many. */
const CHANGES_SHOWN = 20;

/** Long histories are shown from their end, this many entries. */
const SHOWN = 200;

/** Instances are for those who may see them. */
const ACCESS: PageAccess = { title: 'Instance', nav: 'instances', what: 'see instances', permission: INSTANCES_VIEW };

function InstancePage(props: {
  shell: Shell;
  instance: InstanceView;
  definitionName: string | null;
  canAlter: boolean;
  changes: InstanceChange[];
  moreChanges: boolean;
}) {
  const i = props.instance;
  const records = i.activityRecords.slice(-SHOWN);
  const journal = i.journal.slice(-SHOWN);
  return (
    <Layout shell={props.shell} title={`Instance ${i.name ?? i.id}`} nav="instances">
      <h1>{i.name ?? i.id}</h1>
      <dl class="facts">
        <dt>Id</dt>
        <dd>
          <code>{i.id}</code>
        </dd>
        <dt>Definition</dt>
        <dd>{`${props.definitionName ? `${props.definitionName} · ` : ''}${i.definitionId} version ${i.version}`}</dd>
        <dt>Status</dt>
        <dd>{`${i.status} / ${i.subStatus}`}</dd>
        <dt>Correlation id</dt>
        <dd>{i.correlationId ?? '—'}</dd>
        <dt>Waiting on</dt>
        <dd>{i.bookmarks.length ? i.bookmarks.map((b) => `${b.eventName} (${b.activityId})`).join(', ') : '—'}</dd>
        <dt>Scheduled</dt>
        <dd>{i.scheduledActivityIds.length ? i.scheduledActivityIds.join(', ') : '—'}</dd>
        <TimeFact term="Created" iso={i.createdAt} />
        <TimeFact term="Updated" iso={i.updatedAt} />
        <TimeFact term="Finished" iso={i.finishedAt} />
      </dl>
      {props.canAlter ? (
        <p>
          <a href={`/console/new-plan?workflowInstanceId=${encodeURIComponent(i.id)}`} class="button-link">
            Alter this instance
          </a>
        </p>
      ) : null}
      {props.canAlter && i.incidents[0] ? (
        <form method="get" action="/console/new-plan">
          <input type="hidden" name="workflowInstanceId" value={i.id} />
          <input type="hidden" name="incidentActivityId" value={i.incidents[0].activityId} />
          <input type="hidden" name="incidentMessage" value={i.incidents[0].message} />
          <button type="submit" class="secondary" aria-describedby="retry-hint">
            Retry
          </button>{' '}
          <small id="retry-hint">{`Schedules ${i.incidents[0].activityId} again by a plan that verifies no incident is left.`}</small>
        </form>
      ) : null}
      <h2>Variables</h2>
      <Table
        label="Variables"
        columns={['Variable', 'Type', 'Value']}
        rows={i.variables}
        empty={<p>No variables.</p>}
        head={(v) => (
          <>
            {v.name} <small class="muted">{v.id}</small>
          </>
        )}
        cells={(v) => (
          <>
            <td>{v.typeName}</td>
            <td>
              <code>{jsonText(v.value)}</code>
            </td>
          </>
        )}
      />
      <h2>Incidents</h2>
      {i.incidents.length === 0 ? (
        <p>No incidents.</p>
      ) : (
        <ul>
          {i.incidents.map((x) => (
            <li class="wrap">
              {`${x.activityId} (${x.activityType}): `}
              {x.message} <Time iso={x.timestamp} />
            </li>
          ))}
        </ul>
      )}
      <h2>Changes</h2>
      <Table
        label="Plans that changed this instance"
        columns={['Plan', 'Alterations', 'Job', 'Verification', 'When']}
        rows={props.changes}
        empty={<p>No plan has changed this instance.</p>}
        head={(ch) => <a href={planPath(ch.planId)}>{ch.planId}</a>}
        cells={(ch) => (
          <>
            <td>{ch.alterationTypes.join(', ')}</td>
            <td>{JOB_STATUS_LABELS[ch.status] ?? String(ch.status)}</td>
            <td>{ch.verification ?? '—'}</td>
            <td>
              <Time iso={ch.completedAt} />
            </td>
          </>
        )}
      />
      {props.moreChanges ? <p class="muted">The most recent changes; the API lists them all.</p> : null}
      <h2>Activities</h2>
      <Table
        label="Activity records"
        columns={['Activity', 'Type', 'Status', 'Started', 'Completed']}
        rows={records}
        empty={<p>No activity has run.</p>}
        head={(r) => (r.name ? `${r.name} (${r.activityId})` : r.activityId)}
        cells={(r) => (
          <>
            <td>{r.activityType}</td>
            <td>{r.status}</td>
            <td>
              <Time iso={r.startedAt} />
            </td>
            <td>
              <Time iso={r.completedAt} />
            </td>
          </>
        )}
      />
      <h2>Journal</h2>
      {journal.length === 0 ? (
        <p>The journal is empty.</p>
      ) : (
        <ol>
          {journal.map((j) => (
            <li class="wrap">
              <Time iso={j.timestamp} /> {`${j.activityId}: `}
              {j.message}
            </li>
          ))}
        </ol>
      )}
      {i.journal.length > SHOWN ? (
        <p class="muted">{`The last ${SHOWN} of ${i.journal.length} entries; the API has them all.`}</p>
      ) : null}
    </Layout>
  );
}

/** One instance, as `GET /workflow-instances/{id}` shows it. */
export function instanceRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/instances/:id', gate(shell, ACCESS), async (c) => {
    const { pool, definitions } = c.get('deps');
    const instance = await getInstanceView(pool, definitions, callerTenant(c), c.req.param('id'));
    const definition = await definitions.byVersionId(pool, instance.definitionVersionId);
    const changes = may(c, ALTERATIONS_VIEW)
      ? await listInstanceChanges(pool, callerTenant(c), instance.id, { limit: CHANGES_SHOWN })
      : { items: [], nextCursor: null };
    return renderPage(
      c,
      <InstancePage
        shell={shell(c)}
        instance={instance}
        definitionName={definition?.name ?? null}
        canAlter={may(c, ALTERATIONS_EXECUTE)}
        changes={changes.items}
        moreChanges={changes.nextCursor !== null}
      />,
    );
  });
  return app;
}
