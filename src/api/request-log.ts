import { createMiddleware } from 'hono/factory';
import { newId } from '../ids.js';
import type { AppDeps, AppEnv } from './context.js';
import { routeLabel } from './route-label.js';

/** The paths of the health probes and the metrics scrape: noise at info when they succeed. */
export const isProbePath = (path: string) => path === '/health' || path.startsWith('/health/') || path === '/metrics';

/**
 * The first middleware of an app: the request's id (a client's own `x-request-id` when it is one), a logger that
 * names it, the app's deps; after the answer, its one log line and its metrics. A probe or a scrape every few
 * seconds (a load balancer, Kubernetes, Prometheus) is logged at debug, a failing one at warn; any other request
 * at `level` (the API's requests: `requestLogLevel`, info for machines and debug in pretty logs). `probe` says
 * which paths are probes (on the probes' own port, every path is).
 */
export function requestLog(
  deps: AppDeps,
  o: { level: 'info' | 'debug'; trustRequestId: boolean; probe?: (path: string) => boolean },
) {
  const probe = o.probe ?? isProbePath;
  return createMiddleware<AppEnv>(async (c, next) => {
    const incoming = o.trustRequestId ? c.req.header('x-request-id') : undefined;
    const requestId = incoming && /^[\w.:-]{1,100}$/.test(incoming) ? incoming : newId();
    const logger = deps.logger.child({ requestId });
    c.set('deps', deps);
    c.set('requestId', requestId);
    c.set('logger', logger);
    const started = performance.now();
    await next();
    c.header('x-request-id', requestId);
    const principal = c.get('principal');
    const ms = performance.now() - started;
    const level = probe(c.req.path) ? (c.res.status < 400 ? 'debug' : 'warn') : o.level;
    logger[level](
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(ms),
        principal: principal ? principal.id : undefined,
      },
      'request',
    );
    deps.metrics?.requestFinished(routeLabel(c), c.req.method, c.res.status, ms / 1000);
  });
}
