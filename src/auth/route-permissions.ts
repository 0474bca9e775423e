import type { PermissionSpec } from './permissions.js';

/**
 * The permission each kind of operation requires, per model (contract section 2), defined once: the API
 * routes declare them (`secureRoute`) and the console checks the same specs before it shows or runs an
 * action, so the two can never disagree about who may do what.
 */
export const ALTERATIONS_VIEW = {
  structured: 'alterations:view',
  legacy: 'read:alterations',
} as const satisfies PermissionSpec;

export const ALTERATIONS_EXECUTE = {
  structured: 'alterations:execute',
  legacy: 'run:alterations',
} as const satisfies PermissionSpec;

export const INSTANCES_VIEW = {
  structured: 'workflows/instances:view',
  legacy: 'read:workflow-instances',
} as const satisfies PermissionSpec;

export const INSTANCES_EXECUTE = {
  structured: 'workflows/instances:execute',
  legacy: 'exec:workflow-definitions',
} as const satisfies PermissionSpec;

export const DEFINITIONS_VIEW = {
  structured: 'workflows/definitions:view',
  legacy: 'read:workflow-definitions',
} as const satisfies PermissionSpec;

/** Deciding plans awaiting approval (section 10). The legacy model has no string for it: `*`. */
export const ALTERATIONS_APPROVE = {
  structured: 'alterations:approve',
  legacy: '*',
} as const satisfies PermissionSpec;

/** Setting the tenant's approval policy (section 10). The legacy model has no string for it: `*`. */
export const ALTERATIONS_POLICY_UPDATE = {
  structured: 'alterations/policy:update',
  legacy: '*',
} as const satisfies PermissionSpec;

/** Listing a tenant's users with who created each (section 10's four eyes count creators). Legacy: `*`. */
export const USERS_VIEW = {
  structured: 'identity/users:view',
  legacy: '*',
} as const satisfies PermissionSpec;

/** Listing a tenant's API keys (never the key). Legacy: `*`. */
export const KEYS_VIEW = {
  structured: 'identity/api-keys:view',
  legacy: '*',
} as const satisfies PermissionSpec;
