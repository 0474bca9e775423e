import { OpenAPIHono } from '@hono/zod-openapi';
import type { AppDeps, AppEnv } from './context.js';
import { CachedProbes } from './health-checks.js';
import { methodNotAllowed } from './methods.js';
import { handleError, problem } from './problem.js';
import { requestLog } from './request-log.js';
import { probeRoutes } from './routes/probes.js';

/**
 * What a worker-only process serves on METRICS_PORT: `GET /metrics` (with the same permission as on the
 * API, checked against the same keys and tokens in Postgres) and the health probes `GET /health/live` and
 * `GET /health/ready`, so that Prometheus scrapes a worker and a container's health check asks it. Nothing
 * else: a worker takes no API requests. Every answer is logged at debug (a failing one at warn) and counted.
 */
export function createProbeApp(given: AppDeps) {
  const deps: AppDeps = { ...given, probes: given.probes ?? new CachedProbes(given) };
  const app = new OpenAPIHono<AppEnv>();
  // Every answer logged at debug (a failing one, on any path, at warn) and counted, as the API's probes are.
  app.use('*', requestLog(deps, { level: 'debug', trustRequestId: false, probe: () => true }));
  app.route('/', probeRoutes(deps.config.metrics.public));
  const allowed = methodNotAllowed(app.routes);
  app.notFound((c) => {
    const allow = allowed(c.req.path);
    if (allow)
      return problem(c, 405, `${c.req.method} is not supported on ${c.req.path}; use ${allow}`, undefined, { allow });
    return problem(c, 404, `No route for ${c.req.method} ${c.req.path}: this worker serves /metrics and /health/…`);
  });
  app.onError(handleError);
  return app;
}
