import type { Context } from 'hono';
import { checkPermission, mayDo } from '../api/authorize.js';
import type { AppEnv } from '../api/context.js';
import { type PermissionSpec, requiredPermission } from '../auth/permissions.js';
import type { Shell } from './layout.js';

/** Builds a page's frame for a request (who is signed in, the assets). */
export type ShellOf = (c: Context<AppEnv>) => Shell;

/** The permission a spec names under the configured model (what a "may not" message names). */
export function permissionName(c: Context<AppEnv>, spec: PermissionSpec): string {
  return requiredPermission(spec, c.get('deps').config.permissionModel) ?? 'signed in';
}

/** May the signed-in user do what `spec` requires? The check the API's routes make (src/api/authorize.ts). */
export function may(c: Context<AppEnv>, spec: PermissionSpec): boolean {
  return mayDo(c.get('deps').config.permissionModel, c.get('principal'), spec);
}

/** Throws the API's 403 (same words) unless the signed-in user may do what `spec` requires. */
export function requirePermission(c: Context<AppEnv>, spec: PermissionSpec): void {
  checkPermission(c.get('deps').config.permissionModel, c.get('principal'), spec);
}
