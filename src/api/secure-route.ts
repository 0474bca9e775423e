import { createRoute, type RouteConfig } from '@hono/zod-openapi';
import type { PermissionSpec } from '../auth/permissions.js';
import { authorize } from './authorize.js';
import { inputGuard } from './request-body.js';

type SecurityRequirement = Record<string, string[]>;
const SIGNED_IN: SecurityRequirement[] = [{ ApiKey: [] }, { Bearer: [] }];

/**
 * Declares a route together with the permission it requires, in one place: the guard middleware
 * enforces it and the OpenAPI operation shows it (`x-permission` and `security`). After the permission
 * check, the input guard applies the input rule and reads the body (src/api/request-body.ts).
 */
export function secureRoute<const R extends Omit<RouteConfig, 'middleware' | 'security'>>(
  permission: PermissionSpec,
  route: R,
) {
  const security: SecurityRequirement[] = permission === 'public' ? [] : SIGNED_IN;
  const body = route.request?.body ? { required: route.request.body.required === true } : undefined;
  return createRoute({
    ...route,
    security,
    'x-permission': permission,
    middleware: [authorize(permission), inputGuard(body)] as const,
  });
}
