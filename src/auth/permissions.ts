/**
 * The permission models. structured (default): `{resource}:{verb}` with the wildcards `*`, `*:{verb}` and
 * `{resource}:*`. legacy: the 3.8.0 strings, matched exactly, plus `*`.
 */
export type PermissionModel = 'structured' | 'legacy';

/** What a route requires: nothing, any signed-in principal, or a permission per model. */
export type PermissionSpec = 'public' | { structured: string | 'signed-in'; legacy: string | 'signed-in' };

function splitPermission(p: string): [resource: string, verb: string] | undefined {
  const i = p.lastIndexOf(':');
  if (i <= 0 || i === p.length - 1) return undefined;
  return [p.slice(0, i), p.slice(i + 1)];
}

/** Does one grant satisfy the required permission in the structured model? */
export function structuredGrantSatisfies(grant: string, required: string): boolean {
  if (grant === '*' || grant === '*:*' || grant === required) return true;
  const g = splitPermission(grant);
  const r = splitPermission(required);
  if (!g || !r) return false;
  if (g[0] === '*' && g[1] === r[1]) return true;
  if (g[1] === '*' && g[0] === r[0]) return true;
  return false;
}

export function grantsSatisfy(model: PermissionModel, grants: readonly string[], required: string): boolean {
  if (model === 'legacy') return grants.some((g) => g === '*' || g === required);
  return grants.some((g) => structuredGrantSatisfies(g, required));
}

/** The permission a spec requires under a model, or undefined for public / signed-in. */
export function requiredPermission(spec: PermissionSpec, model: PermissionModel): string | undefined {
  if (spec === 'public') return undefined;
  const p = spec[model];
  return p === 'signed-in' ? undefined : p;
}

/** Legacy grants that the structured model no longer honours, with their replacement (null: removed). */
export const LEGACY_REPLACEMENTS: Readonly<Record<string, string | null>> = {
  'read:alterations': 'alterations:view',
  'run:alterations': 'alterations:execute',
  'manage:user-tasks': 'user-tasks:supervise',
  'exec:csharp-expressions': null,
  'exec:python-expressions': null,
  'read:workflow-definitions': 'workflows/definitions:view',
  'write:workflow-definitions': 'workflows/definitions:create',
  'exec:workflow-definitions': 'workflows/instances:execute',
  'read:workflow-instances': 'workflows/instances:view',
  'connections:read': 'connections:view',
  'connections:write': 'connections:create',
  'connections/descriptor:read': null,
};

/**
 * Every structured permission a route requires (src/api/routes), plus those the product names without a
 * route here yet. One list: grant validation and `GET /identity/permissions` read it, and a test checks
 * that every route's `x-permission` is in it.
 */
export const STRUCTURED_PERMISSIONS = [
  'alterations:approve',
  'alterations:execute',
  'alterations/policy:update',
  'alterations:view',
  'audit:view',
  'connections:create',
  'connections:delete',
  'connections:update',
  'connections:view',
  'identity/api-keys:create',
  'identity/api-keys:delete',
  'identity/api-keys:view',
  'identity/roles:create',
  'identity/users:create',
  'identity/users:delete',
  'identity/users:view',
  'service/metrics:view',
  'user-tasks:supervise',
  'workflows/definitions:create',
  'workflows/definitions:view',
  'workflows/instances:execute',
  'workflows/instances:view',
] as const;

/** The legacy (3.8.0) strings, matched exactly in the legacy model. */
export const LEGACY_PERMISSIONS = [...Object.keys(LEGACY_REPLACEMENTS), 'connections:delete']
  .filter((p, i, all) => all.indexOf(p) === i)
  .sort();

const RESOURCES = new Set(STRUCTURED_PERMISSIONS.map((p) => splitPermission(p)![0]));
const VERBS = new Set(STRUCTURED_PERMISSIONS.map((p) => splitPermission(p)![1]));

/**
 * Is `grant` something either model can honour? A known permission of either model, `*` / `*:*`,
 * `*:{known verb}` or `{known resource}:*`. Grants of the model not in force stay valid: a deployment may
 * switch models. Anything else (a typo such as `workflows:read`) would silently grant nothing.
 */
export function isKnownGrant(grant: string): boolean {
  if (grant === '*' || grant === '*:*') return true;
  if ((STRUCTURED_PERMISSIONS as readonly string[]).includes(grant) || LEGACY_PERMISSIONS.includes(grant)) return true;
  const parts = splitPermission(grant);
  if (!parts) return false;
  if (parts[0] === '*') return VERBS.has(parts[1]);
  if (parts[1] === '*') return RESOURCES.has(parts[0]);
  return false;
}

/**
 * For each structured permission, what the legacy model asks for the same operations: the legacy string
 * it replaced, or `*` where the legacy model has none (identity administration, metrics, deciding plans and
 * setting the approval policy).
 */
export const LEGACY_EQUIVALENTS: Readonly<Record<string, string>> = Object.fromEntries(
  STRUCTURED_PERMISSIONS.map((p) => [
    p,
    (
      { 'connections:update': 'connections:write', 'connections:delete': 'connections:delete' } as Record<
        string,
        string
      >
    )[p] ??
      Object.entries(LEGACY_REPLACEMENTS).find(([, structured]) => structured === p)?.[0] ??
      '*',
  ]),
);
