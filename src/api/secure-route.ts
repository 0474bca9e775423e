import { createRoute, type RouteConfig } from '@hono/zod-openapi';
import type { PermissionSpec } from '../auth/permissions.js';
import { authorize } from './authorize.js';

type SecurityRequirement = Record<string, string[]>;
const SIGNED_IN: SecurityRequirement[] = [{ ApiKey: [] }, { Bearer: [] }];

/**
 * Declares a route together with the permission it requires, in one place: the guard middleware
 * enforces it and the OpenAPI operation shows it (`x-permission` and `security`).
 */
export function secureRoute<const R extends Omit<RouteConfig, 'middleware' | 'security'>>(permission: PermissionSpec, route: R) {
  const security: SecurityRequirement[] = permission === 'public' ? [] : SIGNED_IN;
  return createRoute({
    ...route,
    security,
    'x-permission': permission,
    middleware: [authorize(permission)] as const,
  });
}
