import { Hono } from 'hono';
import { type ApiKeyView, listApiKeys } from '../../auth/api-keys.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { KEYS_VIEW, USERS_VIEW } from '../../auth/route-permissions.js';
import { type CreatorView, listUsers, type StoredUserView } from '../../auth/users.js';
import { NotAllowed, Scroll, Time } from '../components.js';
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

function UsersTable(props: { users: StoredUserView[] }) {
  if (props.users.length === 0) return <p>No users in this tenant.</p>;
  return (
    <Scroll label="Users and who created them">
      <table>
        <thead>
          <tr>
            <th scope="col">User</th>
            <th scope="col">Permissions</th>
            <th scope="col">Created by</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {props.users.map((u) => (
            <tr>
              <th scope="row">{u.name}</th>
              <td class="wrap">{grants(u.permissions, u.roles)}</td>
              <td>
                <Creator by={u.createdBy} />
              </td>
              <td>
                <Time iso={u.createdAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Scroll>
  );
}

function KeysTable(props: { keys: ApiKeyView[] }) {
  if (props.keys.length === 0) return <p>No API keys in this tenant.</p>;
  return (
    <Scroll label="API keys and who created them">
      <table>
        <thead>
          <tr>
            <th scope="col">API key</th>
            <th scope="col">Permissions</th>
            <th scope="col">Created by</th>
            <th scope="col">Last used</th>
          </tr>
        </thead>
        <tbody>
          {props.keys.map((k) => (
            <tr>
              <th scope="row">{k.name}</th>
              <td class="wrap">{grants(k.permissions)}</td>
              <td>
                <Creator by={k.createdBy} />
              </td>
              <td>
                <Time iso={k.lastUsedAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Scroll>
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
        <h2>Users</h2>
        {users ? (
          <UsersTable users={users} />
        ) : (
          <NotAllowed what="see users" permission={permissionName(c, USERS_VIEW)} />
        )}
        <h2>API keys</h2>
        {keys ? (
          <KeysTable keys={keys} />
        ) : (
          <NotAllowed what="see API keys" permission={permissionName(c, KEYS_VIEW)} />
        )}
      </Layout>,
      users || keys ? 200 : 403,
    );
  });
  return app;
}
