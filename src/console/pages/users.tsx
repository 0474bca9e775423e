import { Hono } from 'hono';
import { listApiKeys } from '../../auth/api-keys.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { KEYS_VIEW, USERS_VIEW } from '../../auth/route-permissions.js';
import { type CreatorView, listUsers } from '../../auth/users.js';
import { NotAllowed, Table, Time } from '../components.js';
import { Layout, renderPage } from '../layout.js';
import { may, permissionName, type ShellOf } from '../shell.js';

/** Who created a key or user, as a person reads it. */
function Creator(props: { by: CreatorView | null }) {
  const by = props.by;
  if (!by) return <span class="muted">not recorded (stands for itself)</span>;
  const what = by.kind === 'user' ? 'user' : 'API key';
  return <span>{by.name === null ? `${what} ${by.id} (deleted)` : `${by.name} (${what})`}</span>;
}

const grants = (permissions: readonly string[], roles: readonly string[] = []) =>
  [...permissions, ...roles.map((r) => `role ${r}`)].join(', ') || 'none';

/** A user or API key as its table shows it: what it may do, who created it, and one time of note. */
interface Principal {
  name: string;
  permissions: readonly string[];
  roles?: readonly string[];
  createdBy: CreatorView | null;
  at: string | null;
}

/** What each list says: its heading, its table's name and columns, when it is empty, and when it is denied. */
const LISTS = {
  users: {
    heading: 'Users',
    label: 'Users and who created them',
    columns: ['User', 'Permissions', 'Created by', 'Created'],
    empty: 'No users in this tenant.',
    what: 'see users',
  },
  keys: {
    heading: 'API keys',
    label: 'API keys and who created them',
    columns: ['API key', 'Permissions', 'Created by', 'Last used'],
    empty: 'No API keys in this tenant.',
    what: 'see API keys',
  },
};

/** One list of principals with who created each, or why the user may not see it (`rows` undefined). */
function PrincipalsList(props: { list: (typeof LISTS)['users']; rows: Principal[] | undefined; permission: string }) {
  const { list } = props;
  return (
    <>
      <h2>{list.heading}</h2>
      {props.rows ? (
        <Table
          label={list.label}
          columns={list.columns}
          rows={props.rows}
          empty={<p>{list.empty}</p>}
          head={(p) => p.name}
          cells={(p) => (
            <>
              <td class="wrap">{grants(p.permissions, p.roles)}</td>
              <td>
                <Creator by={p.createdBy} />
              </td>
              <td>
                <Time iso={p.at} />
              </td>
            </>
          )}
        />
      ) : (
        <NotAllowed what={list.what} permission={props.permission} />
      )}
    </>
  );
}

/**
 * Users: the tenant's users and API keys with who created each (the records four eyes follow: a key or user
 * may not approve the plans of the principal that made it, nor the other way round). Read-only: users and keys
 * are made through the API (`POST /identity/users`, `POST /identity/api-keys`) or `wfa`.
 */
export function usersRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/users', async (c) => {
    const { pool } = c.get('deps');
    const tenant = callerTenant(c);
    const users = may(c, USERS_VIEW) ? (await listUsers(pool, tenant)).items : undefined;
    const keys = may(c, KEYS_VIEW) ? (await listApiKeys(pool, tenant)).items : undefined;
    return renderPage(
      c,
      <Layout shell={shell(c)} title="Users" nav="users">
        <h1>Users</h1>
        <p class="muted">
          Who may act in this tenant, and who created each: a plan cannot be approved by its submitter, by a key or user
          the submitter created, or by the principal that created the submitter.
        </p>
        <PrincipalsList
          list={LISTS.users}
          rows={users?.map((u) => ({ ...u, at: u.createdAt }))}
          permission={permissionName(c, USERS_VIEW)}
        />
        <PrincipalsList
          list={LISTS.keys}
          rows={keys?.map((k) => ({ ...k, at: k.lastUsedAt }))}
          permission={permissionName(c, KEYS_VIEW)}
        />
      </Layout>,
      users || keys ? 200 : 403,
    );
  });
  return app;
}
