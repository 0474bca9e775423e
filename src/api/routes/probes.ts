import { OpenAPIHono, z } from '@hono/zod-openapi';
import { HTTPException } from 'hono/http-exception';
import { type PermissionSpec, requiredPermission } from '../../auth/permissions.js';
import { ForbiddenError } from '../../errors.js';
import type { AppEnv } from '../context.js';
import { readiness } from '../health-checks.js';
import { jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

/**
 * The permission of `GET /metrics` unless METRICS_PUBLIC=true. The legacy (3.8.0) model has no string for
 * it, so, as for identity administration, it takes `*` there.
 */
export const METRICS_PERMISSION = { structured: 'service/metrics:view', legacy: '*' } as const;

const CheckSchema = z.enum(['ok', 'unavailable']);
const LiveSchema = z.object({ status: z.literal('ok') }).openapi('Liveness');
const ReadySchema = z
  .object({
    status: z.enum(['ok', 'unavailable']),
    checks: z.object({
      postgres: CheckSchema,
      temporal: CheckSchema,
      worker: CheckSchema.optional().openapi({
        description: 'Only in a process that runs a worker: "ok" while every one of its Temporal workers polls',
      }),
    }),
    detail: z.string().optional().openapi({
      description: "Why a check fails when the service knows, e.g. Temporal's dev server being built on a first start",
    }),
  })
  .openapi('Readiness');

const live = secureRoute('public', {
  method: 'get',
  path: '/health/live',
  tags: ['Service'],
  summary: 'Liveness: the process serves requests (no dependency is checked)',
  responses: { 200: jsonContent(LiveSchema, 'The process answers') },
});

const ready = secureRoute('public', {
  method: 'get',
  path: '/health/ready',
  tags: ['Service'],
  summary: 'Readiness: Postgres and Temporal answer and, in a process that runs a worker, the worker polls',
  responses: {
    200: jsonContent(ReadySchema, 'Every check is "ok"'),
    503: jsonContent(ReadySchema, 'A check failed: it says "unavailable"'),
  },
});

const metricsRoute = (permission: PermissionSpec) =>
  secureRoute(permission, {
    method: 'get',
    path: '/metrics',
    tags: ['Service'],
    summary: "This process's metrics in the Prometheus text format (the service's, then the Temporal SDK's)",
    description:
      'Per process and across tenants: no label names a tenant, a plan or an instance, so only a default-tenant ' +
      'principal may read them (with `service/metrics:view`; `*` in the legacy model), unless METRICS_PUBLIC=true ' +
      'makes them public. docs/operations.md, "Metrics and health", lists every metric.',
    responses: {
      200: {
        description: 'The exposition (text format 0.0.4)',
        content: { 'text/plain': { schema: z.string() } },
      },
      ...(permission === 'public' ? {} : problems(401, 403)),
    },
  });

/**
 * Health probes and metrics, for load balancers, orchestrators and Prometheus. Served by the API (and by a
 * worker-only process on METRICS_PORT, src/api/probe-app.ts). `metricsPublic`: METRICS_PUBLIC.
 */
export function probeRoutes(metricsPublic: boolean) {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(live, (c) => c.json({ status: 'ok' as const }, 200));
  app.openapi(ready, async (c) => {
    const deps = c.get('deps');
    const result = deps.probes ? await deps.probes.readiness() : await readiness(deps);
    return c.json(result, result.status === 'ok' ? 200 : 503);
  });
  const permission: PermissionSpec = metricsPublic ? 'public' : METRICS_PERMISSION;
  app.openapi(metricsRoute(permission), async (c) => {
    const { metrics, config } = c.get('deps');
    // Metrics count every tenant's work on this node: a principal of another tenant, whatever it holds,
    // would learn about the others' (as only the operator acts across tenants, contract section 2).
    const principal = permission === 'public' ? undefined : c.get('principal');
    if (principal && principal.tenantId !== null) {
      throw new ForbiddenError(
        `Missing permission: metrics cover every tenant of this node, so they require "${requiredPermission(permission, config.permissionModel)}" in the default tenant`,
      );
    }
    // Every service hands its metrics to its app; an app built without them says so rather than serve nothing.
    if (!metrics) throw new HTTPException(503, { message: 'This process collects no metrics' });
    return c.text(await metrics.scrape(), 200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
  });
  return app;
}
