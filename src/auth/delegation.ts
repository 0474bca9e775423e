import type { Queryable } from '../db/pool.js';
import { ForbiddenError, pointer, ValidationError } from '../errors.js';
import { grantsSatisfy, isKnownGrant, type PermissionModel } from './permissions.js';
import { tenantKey } from './principal.js';

/** Who is delegating: the calling principal's tenant and effective grants. */
export interface Delegator {
  tenantId: string | null;
  permissions: readonly string[];
}

/** A 400 naming each grant that neither permission model knows (`/permissions/{i}`). */
export function checkGrantsKnown(permissions: readonly string[], field = 'permissions'): void {
  const unknown = permissions.map((p, i) => [p, i] as const).filter(([p]) => !isKnownGrant(p));
  if (unknown.length) {
    throw new ValidationError(
      `Unknown permission${unknown.length > 1 ? 's' : ''}: ${unknown.map(([p]) => `"${p}"`).join(', ')}; GET /identity/permissions lists the valid ones`,
      unknown.map(([p, i]) => ({
        path: pointer([field, i]),
        message: `"${p}" is not a permission of either model, nor a wildcard form of one`,
      })),
    );
  }
}

/** The caller must hold every grant it hands out (or `*`). */
export function checkHoldsAll(
  caller: Delegator,
  permissions: readonly string[],
  model: PermissionModel,
  verb = 'grant',
): void {
  for (const p of permissions) {
    if (!caller.permissions.includes('*') && !grantsSatisfy(model, caller.permissions, p)) {
      throw new ForbiddenError(`You cannot ${verb} "${p}": you do not hold it yourself`);
    }
  }
}

/**
 * The operator: a principal of the default tenant holding `*` (in both models). Only the operator reaches
 * other tenants; a tenant's own `*` administers that tenant only, so it can never make itself the operator.
 */
export function isOperator(caller: Delegator): boolean {
  return caller.tenantId === null && caller.permissions.includes('*');
}

const OPERATOR_ONLY = 'requires "*" in the default tenant (the operator)';

/**
 * The tenant an identity request names: the caller's own when absent, the default tenant for `null` or ''.
 * Naming another one is reserved to the operator (403 naming `*` for anyone else): delegating
 * `connections:view` must never become `connections:view` in every tenant. Returns its storage key.
 */
export function namedTenant(caller: Delegator, requestedTenant: string | null | undefined, what: string): string {
  const target = requestedTenant === undefined ? caller.tenantId : requestedTenant === '' ? null : requestedTenant;
  if (target !== caller.tenantId && !isOperator(caller)) {
    throw new ForbiddenError(`Missing permission: ${what} another tenant ${OPERATOR_ONLY}`);
  }
  return tenantKey(target);
}

/** Where a new user or key goes (see `namedTenant`). */
export function placementTenant(caller: Delegator, requestedTenant: string | null | undefined): string {
  return namedTenant(caller, requestedTenant, 'placing a principal in');
}

/**
 * The tenant scope of a principal administration by id (revoking a key, deleting a user): the caller's own
 * tenant, or every tenant (undefined) for the operator. Outside the scope such a principal is a 404.
 */
export function administeredTenant(caller: Delegator): string | undefined {
  return isOperator(caller) ? undefined : tenantKey(caller.tenantId);
}

/** The grants the named roles of a tenant carry (a user given those roles gets them). */
export async function roleGrants(db: Queryable, tenant: string, roles: readonly string[]): Promise<string[]> {
  if (roles.length === 0) return [];
  const { rows } = await db.query<{ p: string }>(
    'SELECT DISTINCT unnest(permissions) AS p FROM roles WHERE tenant_id = $1 AND name = ANY($2::text[])',
    [tenant, [...roles]],
  );
  return rows.map((r) => r.p);
}
