import { Hono } from 'hono';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { ValidationError } from '../../errors.js';
import { INT32_MAX } from '../../vocabulary/input.js';
import { NotFoundError } from '../../errors.js';
import { ALTERATIONS_EXECUTE, DEFINITIONS_VIEW, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { findDefinition, listLatestDefinitions } from '../../engine/definitions.js';
import { activityCounts } from '../../engine/incident-groups.js';
import { Table } from '../components.js';
import { count } from '../format.js';
import { FlowchartSvg, MAX_DRAWN } from '../flowchart-svg.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage } from '../layout.js';
import { instancesPath } from './fleet.js';
import { may, type ShellOf } from '../shell.js';

/**
 * Definitions (contract section 12, "In the console"): the tenant's definitions, and each version's flowchart
 * drawn with how many unfinished instances wait on, have scheduled, or are faulted at each activity; `Migrate
 * these` opens New plan with a Migrate of that version's instances to the latest, its mappings drafted.
 */
const ACCESS: PageAccess = {
  title: 'Definitions',
  nav: 'definitions',
  what: 'see definitions',
  permission: DEFINITIONS_VIEW,
};
const LIST_LIMIT = 200;

function versionOf(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > INT32_MAX)
    throw new ValidationError('The version is not valid', [
      { path: '/query/version', message: 'A whole number, 1 or more' },
    ]);
  return n;
}

export function definitionsRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/definitions', gate(shell, ACCESS), async (c) => {
    const { pool } = c.get('deps');
    const page = await listLatestDefinitions(pool, callerTenant(c), { limit: LIST_LIMIT });
    return renderPage(
      c,
      <Layout shell={shell(c)} title="Definitions" nav="definitions">
        <h1>Definitions</h1>
        <Table
          label="Definitions"
          columns={['Definition', 'Name', 'Latest version']}
          rows={page.items}
          empty={<p>No definition yet.</p>}
          head={(d) => <a href={`/console/definitions/${encodeURIComponent(d.definitionId)}`}>{d.definitionId}</a>}
          cells={(d) => (
            <>
              <td>{d.name ?? '—'}</td>
              <td>{String(d.version)}</td>
            </>
          )}
        />
        {page.totalCount > page.items.length ? (
          <p class="muted">{`The first ${page.items.length} of ${count(page.totalCount)} definitions; the API lists them all.`}</p>
        ) : null}
      </Layout>,
    );
  });

  app.get('/definitions/:definitionId', gate(shell, ACCESS), async (c) => {
    const { pool } = c.get('deps');
    const tenant = callerTenant(c);
    const definitionId = c.req.param('definitionId');
    const version = versionOf(c.req.query('version'));
    const def = await findDefinition(pool, tenant, definitionId, version);
    if (!def)
      throw new NotFoundError(
        `Workflow definition ${definitionId}${version === undefined ? '' : ` version ${version}`} not found`,
      );
    const latest = def.isLatest ? def : await findDefinition(pool, tenant, definitionId);
    const canCount = may(c, INSTANCES_VIEW);
    const counts = canCount ? await activityCounts(pool, tenant, def.id, def.root.activities) : [];
    const byActivity = new Map(counts.map((x) => [x.activityId, x]));
    const canMigrate = may(c, ALTERATIONS_EXECUTE) && latest !== undefined && latest.version > def.version;
    const versions = Array.from({ length: latest?.version ?? def.version }, (_, i) => i + 1);
    const title = `${def.name ?? def.definitionId} version ${def.version}`;
    return renderPage(
      c,
      <Layout shell={shell(c)} title={title} nav="definitions">
        <h1>{title}</h1>
        <nav aria-label="Versions">
          <ul>
            {versions.map((v) => (
              <li>
                <a
                  href={`/console/definitions/${encodeURIComponent(def.definitionId)}?version=${v}`}
                  aria-current={v === def.version ? 'page' : undefined}
                >
                  {`Version ${v}`}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <p>
          <a href={instancesPath(def.definitionId)}>Its instances</a>
        </p>
        {canMigrate ? (
          <form method="get" action="/console/new-plan">
            <input type="hidden" name="from" value="definitions" />
            <input type="hidden" name="definitionId" value={def.definitionId} />
            <input type="hidden" name="definitionVersionId" value={def.id} />
            <input type="hidden" name="migrateFrom" value={String(def.version)} />
            <input type="hidden" name="migrateTo" value={String(latest!.version)} />
            <button type="submit">Migrate these</button>
            <small>{` This version's unfinished instances to version ${latest!.version}, the activity mappings drafted.`}</small>
          </form>
        ) : null}
        <h2>Flowchart</h2>
        {canCount ? null : <p class="muted">Counts need the permission to see instances.</p>}
        <div class="flowchart-box">
          <FlowchartSvg root={def.root} counts={counts} title={`The flowchart of ${title}`} />
        </div>
        {def.root.activities.length > MAX_DRAWN ? (
          <p class="muted">{`${count(def.root.activities.length)} activities: too many to draw; the table lists them.`}</p>
        ) : null}
        <h2>Activities</h2>
        <Table
          label="Activities and their unfinished instances"
          columns={['Activity', 'Type', 'Waiting', 'Scheduled', 'Faulted']}
          rows={def.root.activities.map((a) => ({ a, n: byActivity.get(a.id) }))}
          empty={<p>No activities.</p>}
          head={({ a }) => (typeof a.name === 'string' && a.name ? `${a.name} (${a.id})` : a.id)}
          cells={({ a, n }) => (
            <>
              <td>{a.type}</td>
              <td>{count(n?.waiting ?? 0)}</td>
              <td>{count(n?.scheduled ?? 0)}</td>
              <td>{count(n?.faulted ?? 0)}</td>
            </>
          )}
        />
      </Layout>,
    );
  });
  return app;
}
