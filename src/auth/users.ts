import { noteAudit } from '../audit/scope.js';
import { randomBytes } from 'node:crypto';
import { hash as argon2Hash, verify as argon2Verify } from '@node-rs/argon2';
import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { ConflictError, NotFoundError, pointer, ValidationError } from '../errors.js';
import { newId } from '../ids.js';
import { tenantOut } from './principal.js';
import { isUniqueViolation } from '../db/errors.js';

/** The bootstrap administrator's user name (ADMIN_PASSWORD), reserved for the default tenant. */
export const ADMIN_NAME = 'admin';

/** Passwords and secrets: Argon2id (OWASP's first choice) with the library's salted defaults. */
export function hashSecret(secret: string): Promise<string> {
  return argon2Hash(secret);
}

export async function verifySecret(hash: string, secret: string): Promise<boolean> {
  try {
    return await argon2Verify(hash, secret);
  } catch {
    return false;
  }
}

/** A hash of nothing anyone knows: verified against when the user does not exist, so timing tells nothing. */
let dummyHash: Promise<string> | undefined;
const dummy = () => (dummyHash ??= argon2Hash('no user has this password'));

export interface UserView {
  id: string;
  name: string;
  roles: string[];
  permissions: string[];
  tenantId: string | null;
}

/** Who created a key or user, as the identity lists show it (`name` null when that principal is gone). */
export interface CreatorView {
  kind: 'user' | 'apiKey';
  id: string;
  name: string | null;
}

/** A stored user as listed: never its password hash. */
export interface StoredUserView extends UserView {
  createdAt: string;
  createdBy: CreatorView | null;
}

/** The key or user that creates a principal, as recorded on it (`created_by`). */
export interface CreatorRef {
  kind: 'user' | 'apiKey';
  id: string;
}

/**
 * SQL of the creator of a row aliased `t` (a user or a key) with its name: the user or key it names, the
 * operator's ADMIN_API_KEY by its own name; null when none is recorded.
 */
export const CREATOR_SQL = (t: string) => `CASE WHEN ${t}.created_by IS NULL THEN NULL ELSE jsonb_build_object(
    'kind', ${t}.created_by ->> 'kind', 'id', ${t}.created_by ->> 'id',
    'name', CASE WHEN ${t}.created_by ->> 'kind' = 'user'
                 THEN (SELECT cu.name FROM users cu WHERE cu.id = ${t}.created_by ->> 'id')
                 WHEN ${t}.created_by ->> 'id' = 'admin-api-key' THEN 'ADMIN_API_KEY'
                 ELSE (SELECT ck.name FROM api_keys ck WHERE ck.id = ${t}.created_by ->> 'id') END) END`;

/** The tenant's users with their roles, grants and creators, oldest first; never a password hash. */
export async function listUsers(
  db: Queryable,
  tenantKey: string,
): Promise<{ items: StoredUserView[]; totalCount: number }> {
  const { rows } = await db.query<{
    id: string;
    name: string;
    tenant_id: string;
    roles: string[];
    permissions: string[];
    created_at: Date;
    created_by: CreatorView | null;
  }>(
    `SELECT u.id, u.name, u.tenant_id, u.permissions, u.created_at,
            ARRAY(SELECT r.name FROM user_roles ur JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = u.id ORDER BY r.name) AS roles,
            ${CREATOR_SQL('u')} AS created_by
       FROM users u WHERE u.tenant_id = $1 ORDER BY u.created_at, u.id`,
    [tenantKey],
  );
  const items = rows.map((r) => ({
    id: r.id,
    name: r.name,
    roles: r.roles,
    permissions: r.permissions,
    tenantId: tenantOut(r.tenant_id),
    createdAt: r.created_at.toISOString(),
    createdBy: r.created_by,
  }));
  return { items, totalCount: items.length };
}

export interface RoleView {
  id: string;
  name: string;
  permissions: string[];
}

export async function createRole(
  db: Queryable,
  tenantKey: string,
  input: { name: string; permissions: string[] },
): Promise<RoleView> {
  const id = newId();
  noteAudit({ targetId: id });
  try {
    await db.query('INSERT INTO roles (id, tenant_id, name, permissions) VALUES ($1, $2, $3, $4::text[])', [
      id,
      tenantKey,
      input.name,
      input.permissions,
    ]);
  } catch (err) {
    if (isUniqueViolation(err)) throw new ConflictError(`A role named "${input.name}" already exists`);
    throw err;
  }
  return { id, name: input.name, permissions: input.permissions };
}

const CONFUSABLE_SCRIPTS = [
  ['Latin', /\p{Script=Latin}/u],
  ['Cyrillic', /\p{Script=Cyrillic}/u],
  ['Greek', /\p{Script=Greek}/u],
] as const;

/**
 * Why a new user name could pass for another one, or undefined. Names are what people sign in and grant
 * by, so look-alikes are refused: invisible and control characters (`admin\u200b`), other spaces than the
 * plain one, compatibility forms (fullwidth `ａｄｍｉｎ`; a name must be its own NFKC form), and names that mix
 * the Latin, Cyrillic and Greek scripts (Cyrillic `а` in `аdmin`). A name wholly in one script that looks
 * like a name in another is not caught (UTS #39 whole-script confusables); user names are unique
 * regardless of case.
 */
export function userNameProblem(name: string): string | undefined {
  if (/[\p{Cc}\p{Cf}\p{Co}\p{Cn}]/u.test(name))
    return 'A user name may not contain invisible, control or unassigned characters';
  if (/[^\S ]/u.test(name)) return 'A user name may contain no other space than the plain one';
  if (name.normalize('NFKC') !== name)
    return 'A user name must be in its plain form (NFKC): no fullwidth, ligature or other compatibility characters';
  const scripts = CONFUSABLE_SCRIPTS.filter(([, re]) => re.test(name)).map(([script]) => script);
  if (scripts.length > 1)
    return `A user name may not mix scripts (${scripts.join(' and ')}): it could pass for another`;
  return undefined;
}

export async function createUser(
  pool: pg.Pool,
  tenantKey: string,
  input: {
    name: string;
    password: string;
    roles?: string[] | undefined;
    permissions?: string[] | undefined;
    /** Who makes it: four eyes refuse it the plans of its creator's line (src/alterations/governance.ts). */
    createdBy?: CreatorRef | undefined;
  },
): Promise<UserView> {
  const roles = [...new Set(input.roles ?? [])];
  const problem = userNameProblem(input.name);
  if (problem) throw new ValidationError(problem, [{ path: '/name', message: problem }]);
  // `admin` is the bootstrap user's name (ADMIN_PASSWORD gives it `*`): only the default tenant has one.
  if (tenantKey !== '' && input.name.trim().toLowerCase() === ADMIN_NAME) {
    throw new ConflictError('The user name "admin" is reserved for the bootstrap administrator of the default tenant');
  }
  const passwordHash = await hashSecret(input.password);
  return withTransaction(pool, async (client) => {
    const { rows: found } = await client.query<{ id: string; name: string }>(
      'SELECT id, name FROM roles WHERE tenant_id = $1 AND name = ANY($2::text[])',
      [tenantKey, roles],
    );
    const missing = roles.map((r, i) => [r, i] as const).filter(([r]) => !found.some((f) => f.name === r));
    if (missing.length) {
      throw new ValidationError(
        'Unknown roles',
        missing.map(([r, i]) => ({ path: pointer(['roles', i]), message: `No role named "${r}" in this tenant` })),
      );
    }
    const id = newId();
    noteAudit({ targetId: id });
    try {
      await client.query(
        'INSERT INTO users (id, tenant_id, name, password_hash, permissions, created_by) VALUES ($1, $2, $3, $4, $5::text[], $6::jsonb)',
        [
          id,
          tenantKey,
          input.name,
          passwordHash,
          input.permissions ?? [],
          input.createdBy ? JSON.stringify(input.createdBy) : null,
        ],
      );
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError(`A user named "${input.name}" already exists`);
      throw err;
    }
    if (found.length) {
      await client.query('INSERT INTO user_roles (user_id, role_id) SELECT $1, unnest($2::text[])', [
        id,
        found.map((f) => f.id),
      ]);
    }
    return { id, name: input.name, roles, permissions: input.permissions ?? [], tenantId: tenantOut(tenantKey) };
  });
}

/**
 * The effective grants (own ∪ roles') of a user of the tenant (of any tenant when `tenantKey` is undefined:
 * the operator), or undefined when there is no such user.
 */
export async function userGrants(
  db: Queryable,
  tenantKey: string | undefined,
  id: string,
): Promise<string[] | undefined> {
  const user = await loadUser(db, id);
  return user && (tenantKey === undefined || user.tenantKey === tenantKey) ? user.permissions : undefined;
}

/**
 * Deletes a user of the tenant (any tenant when `tenantKey` is undefined); its sessions go with it, so its
 * refresh and access tokens stop working and its event streams end.
 */
export async function deleteUser(db: Queryable, tenantKey: string | undefined, id: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM users WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)', [
    id,
    tenantKey ?? null,
  ]);
  if (!rowCount) throw new NotFoundError(`User ${id} not found`);
}

export interface StoredUser {
  id: string;
  name: string;
  tenantKey: string;
  /** The user's own grants plus its roles'. */
  permissions: string[];
}

/** SQL of a user's effective grants (own ∪ roles', sorted), for the row of `users` named `u`. */
export const EFFECTIVE_GRANTS_SQL = `ARRAY(SELECT DISTINCT p FROM unnest(u.permissions || coalesce(
              (SELECT array_agg(rp) FROM user_roles ur JOIN roles r ON r.id = ur.role_id, unnest(r.permissions) rp WHERE ur.user_id = u.id),
              '{}')) AS p ORDER BY p)`;

/** A user with its effective grants (own ∪ roles'), or undefined. */
export async function loadUser(db: Queryable, id: string): Promise<StoredUser | undefined> {
  const { rows } = await db.query<{ id: string; name: string; tenant_id: string; permissions: string[] }>(
    `SELECT u.id, u.name, u.tenant_id, ${EFFECTIVE_GRANTS_SQL} AS permissions
       FROM users u WHERE u.id = $1`,
    [id],
  );
  const r = rows[0];
  return r ? { id: r.id, name: r.name, tenantKey: r.tenant_id, permissions: r.permissions } : undefined;
}

/** The user a sign-in names, for its audit entry's tenant (a failed sign-in too). */
export async function userTenantByName(
  db: Queryable,
  name: string,
): Promise<{ id: string; tenantKey: string } | undefined> {
  const { rows } = await db.query<{ id: string; tenant_id: string }>(
    'SELECT id, tenant_id FROM users WHERE lower(name) = lower($1)',
    [name],
  );
  return rows[0] ? { id: rows[0].id, tenantKey: rows[0].tenant_id } : undefined;
}

/** Checks a name and password; undefined when either is wrong (the same time either way). */
export async function verifyCredentials(
  db: Queryable,
  name: string,
  password: string,
): Promise<StoredUser | undefined> {
  const { rows } = await db.query<{ id: string; password_hash: string }>(
    'SELECT id, password_hash FROM users WHERE lower(name) = lower($1)',
    [name],
  );
  const r = rows[0];
  if (!r) {
    await verifySecret(await dummy(), password);
    return undefined;
  }
  if (!(await verifySecret(r.password_hash, password))) return undefined;
  return loadUser(db, r.id);
}

/**
 * A first start without ADMIN_PASSWORD, on a database with no user at all, makes the console's first user:
 * `admin` (default tenant, grant `*`) with a generated password, which is returned so the start shows it once;
 * only its hash is stored. Later starts (any user exists) return undefined, and so does the second of two
 * processes starting at once (user names are unique).
 */
export async function ensureFirstUser(pool: pg.Pool): Promise<string | undefined> {
  const { rowCount } = await pool.query('SELECT 1 FROM users LIMIT 1');
  if (rowCount) return undefined;
  const password = randomBytes(15).toString('base64url');
  try {
    const { rowCount: made } = await pool.query(
      `INSERT INTO users (id, tenant_id, name, password_hash, permissions)
       SELECT $1, '', 'admin', $2, '{*}' WHERE NOT EXISTS (SELECT 1 FROM users)`,
      [newId(), await hashSecret(password)],
    );
    return made ? password : undefined;
  } catch (err) {
    if (isUniqueViolation(err)) return undefined;
    throw err;
  }
}

/**
 * ADMIN_PASSWORD: the user `admin` (default tenant, grant `*`) exists with that password. Created on first
 * start; on later starts its password follows the variable.
 */
export async function ensureAdminUser(pool: pg.Pool, password: string): Promise<void> {
  const { rows } = await pool.query<{ id: string; tenant_id: string; password_hash: string }>(
    "SELECT id, tenant_id, password_hash FROM users WHERE lower(name) = 'admin'",
  );
  const existing = rows[0];
  // The name is unique across tenants. A user `admin` of another tenant (made before the name was
  // reserved) must never receive ADMIN_PASSWORD and `*`: the start stops and says what to do instead.
  if (existing && existing.tenant_id !== '') {
    throw new Error(
      `ADMIN_PASSWORD is set, but the user named "admin" belongs to tenant "${existing.tenant_id}", not the default tenant; ` +
        'it is not made the administrator. Delete or rename that user, or unset ADMIN_PASSWORD.',
    );
  }
  if (!existing) {
    try {
      await pool.query(
        "INSERT INTO users (id, tenant_id, name, password_hash, permissions) VALUES ($1, '', 'admin', $2, '{*}')",
        [newId(), await hashSecret(password)],
      );
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
    return;
  }
  if (!(await verifySecret(existing.password_hash, password))) {
    await pool.query("UPDATE users SET password_hash = $2, permissions = '{*}', updated_at = now() WHERE id = $1", [
      existing.id,
      await hashSecret(password),
    ]);
  }
}
