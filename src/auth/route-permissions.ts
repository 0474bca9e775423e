import type { PermissionSpec } from './permissions.js';

/** An operation's permission in the structured model and in the legacy one. */
const spec = <S extends string, L extends string>(structured: S, legacy: L) =>
  ({ structured, legacy }) as const satisfies PermissionSpec;

/**
 * The permission each kind of operation requires, per model (contract section 2), defined once: the API
 * routes declare them (`secureRoute`) and the console checks the same specs before it shows or runs an
 * action, so the two can never disagree about who may do what.
 */
export const ALTERATIONS_VIEW = spec('alterations:view', 'read:alterations');

export const ALTERATIONS_EXECUTE = spec('alterations:execute', 'run:alterations');

export const INSTANCES_VIEW = spec('workflows/instances:view', 'read:workflow-instances');

export const INSTANCES_EXECUTE = spec('workflows/instances:execute', 'exec:workflow-definitions');

export const DEFINITIONS_VIEW = spec('workflows/definitions:view', 'read:workflow-definitions');

/** Deciding plans awaiting approval (section 10). The legacy model has no string for it: `*`. */
export const ALTERATIONS_APPROVE = spec('alterations:approve', '*');

/** Setting the tenant's approval policy (section 10). The legacy model has no string for it: `*`. */
export const ALTERATIONS_POLICY_UPDATE = spec('alterations/policy:update', '*');

/** Listing a tenant's users with who created each (section 10's four eyes count creators). Legacy: `*`. */
export const USERS_VIEW = spec('identity/users:view', '*');

/** Listing a tenant's API keys (never the key). Legacy: `*`. */
export const KEYS_VIEW = spec('identity/api-keys:view', '*');

/** Reading the audit trail (section 13). The legacy model has no string for it: `*`. */
export const AUDIT_VIEW = spec('audit:view', '*');
