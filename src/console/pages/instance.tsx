import { Hono } from 'hono';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { ALTERATIONS_EXECUTE, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { getInstanceView } from '../../engine/instances.js';
import type { InstanceView } from '../../engine/instance-views.js';
import { NotAllowed, Scroll, Time } from '../components.js';
import { jsonText } from '../format.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import { may, permissionName, type ShellOf } from '../shell.js';

/** Long histories are shown from their end, this many entries. */
const SHOWN = 200;

function InstancePage(props: {
  shell: Shell;
  instance: InstanceView;
  definitionName: string | null;
  canAlter: boolean;
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
        <dt>Created</dt>
        <dd>
          <Time iso={i.createdAt} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time iso={i.updatedAt} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <Time iso={i.finishedAt} />
        </dd>
      </dl>
      {props.canAlter ? (
        <p>
          <a href={`/console/new-plan?workflowInstanceId=${encodeURIComponent(i.id)}`} class="button-link">
            Alter this instance
          </a>
        </p>
      ) : null}
      <h2>Variables</h2>
      {i.variables.length === 0 ? (
        <p>No variables.</p>
      ) : (
        <Scroll label="Variables">
          <table>
            <thead>
              <tr>
                <th scope="col">Variable</th>
                <th scope="col">Type</th>
                <th scope="col">Value</th>
              </tr>
            </thead>
            <tbody>
              {i.variables.map((v) => (
                <tr>
                  <th scope="row">
                    {v.name} <small class="muted">{v.id}</small>
                  </th>
                  <td>{v.typeName}</td>
                  <td>
                    <code>{jsonText(v.value)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
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
      <h2>Activities</h2>
      {records.length === 0 ? (
        <p>No activity has run.</p>
      ) : (
        <Scroll label="Activity records">
          <table>
            <thead>
              <tr>
                <th scope="col">Activity</th>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
                <th scope="col">Started</th>
                <th scope="col">Completed</th>
              </tr>
            </thead>
            <tbody>
              {records.map((r) => (
                <tr>
                  <th scope="row">{r.name ? `${r.name} (${r.activityId})` : r.activityId}</th>
                  <td>{r.activityType}</td>
                  <td>{r.status}</td>
                  <td>
                    <Time iso={r.startedAt} />
                  </td>
                  <td>
                    <Time iso={r.completedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
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
  app.get('/instances/:id', async (c) => {
    if (!may(c, INSTANCES_VIEW)) {
      return renderPage(
        c,
        <Layout shell={shell(c)} title="Instance" nav="instances">
          <h1>Instance</h1>
          <NotAllowed what="see instances" permission={permissionName(c, INSTANCES_VIEW)} />
        </Layout>,
        403,
      );
    }
    const { pool, definitions } = c.get('deps');
    const instance = await getInstanceView(pool, definitions, callerTenant(c), c.req.param('id'));
    const definition = await definitions.byVersionId(pool, instance.definitionVersionId);
    return renderPage(
      c,
      <InstancePage
        shell={shell(c)}
        instance={instance}
        definitionName={definition?.name ?? null}
        canAlter={may(c, ALTERATIONS_EXECUTE)}
      />,
    );
  });
  return app;
}
