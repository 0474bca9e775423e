import { OpenAPIHono } from '@hono/zod-openapi';
import { requestPool } from '../db/pool.js';
import { tenantKey } from '../auth/principal.js';
import { newId } from '../ids.js';
import { TenantCounter, TenantGate } from '../shares.js';
import type { AppDeps, AppEnv } from './context.js';
import { methodNotAllowed } from './methods.js';
import { documentProblems } from './openapi-problems.js';
import { handleError, problem, zodFieldErrors } from './problem.js';
import { settleBody } from './request-body.js';
import { traceRequests } from './tracing.js';
import { alterationRoutes } from './routes/alterations.js';
import { planEventRoutes } from './routes/plan-events.js';
import { catalogRoutes } from './routes/catalogs.js';
import { connectionRoutes } from './routes/connections.js';
import { definitionRoutes } from './routes/definitions.js';
import { identityRoutes } from './routes/identity.js';
import { instanceRoutes } from './routes/instances.js';
import { probeRoutes } from './routes/probes.js';
import { serviceRoutes } from './routes/service.js';
import { routeLabel } from './route-label.js';

const JSON_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i;
/** API connections no tenant's requests take: credential checks and `/health` always find one. */
const RESERVED_CONNECTIONS = 2;

/** Builds the HTTP app from its dependencies; tests drive it in process with `app.request()`. */
export function createApp(deps: AppDeps) {
  const app = new OpenAPIHono<AppEnv>({
    // The one validation hook: every schema violation is a 400 naming each offending field.
    defaultHook: (result, c) => {
      if (!result.success) {
        const target = (result as { target?: string }).target;
        const prefix = target === 'query' ? ['query'] : target === 'param' ? ['params'] : [];
        return problem(c, 400, 'The request is not valid; see errors', zodFieldErrors(result.error, prefix));
      }
      return undefined;
    },
  });

  // First, so that everything after it, the request's log line included, runs inside the request's span.
  if (deps.tracer) app.use('*', traceRequests(deps.tracer));
  app.use('*', async (c, next) => {
    const incoming = c.req.header('x-request-id');
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
    // A health probe or a scrape every few seconds (a load balancer, Kubernetes, Prometheus) is noise at
    // info; a failing one is not, and says so at warn.
    const probe = c.req.path === '/health' || c.req.path.startsWith('/health/') || c.req.path === '/metrics';
    logger[probe ? (c.res.status < 400 ? 'debug' : 'warn') : 'info'](
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

  // Each request's statements run through a view of the pool that cancels them when the client goes away,
  // and whose connections count against its tenant's share (TENANT_API_CONNECTIONS): a tenant whose
  // requests hold their share waits its turn while the others go on. All tenants' requests together hold
  // at most the pool less RESERVED_CONNECTIONS, which are for what no share counts: credential checks
  // (the tenant is not known before them; each is one indexed read) and `/health`, through `ungatedPool`.
  // Public requests (sign-in, refresh) share one share of their own.
  const connections = new TenantGate(deps.config.shares.apiConnectionsPerTenant);
  const overall = new TenantGate(Math.max(1, deps.config.database.apiPoolSize - RESERVED_CONNECTIONS));
  app.use('*', async (c, next) => {
    const key = () => {
      const principal = c.get('principal');
      return principal ? `tenant:${tenantKey(principal.tenantId)}` : 'anonymous';
    };
    const signal = c.req.raw.signal;
    c.set('deps', {
      ...deps,
      pool: requestPool(deps.pool, signal, {
        gate: connections,
        overall,
        key,
        waitMs: deps.apiAcquireTimeoutMs ?? 5_000,
      }),
      ungatedPool: requestPool(deps.pool, signal),
    });
    await next();
  });

  // Bodies are read where a route reads them (src/api/request-body.ts), after authentication and
  // routing; whatever answered before that, the unread body is settled here so the connection survives.
  app.use('*', async (c, next) => {
    await next();
    await settleBody(c);
  });

  // Every JSON and problem+json body ends with a newline, so a terminal's next prompt (or the next
  // curl output) starts on its own line.
  app.use('*', async (c, next) => {
    await next();
    if (c.get('streamed') || !JSON_TYPE.test(c.res.headers.get('content-type') ?? '') || !c.res.body) return;
    const text = await c.res.text();
    const headers = new Headers(c.res.headers);
    // The adapter computes Content-Length from the new string body.
    headers.delete('content-length');
    const res = new Response(text.endsWith('\n') ? text : `${text}\n`, { status: c.res.status, headers });
    // Cleared first: assigning over a response merges the old one's headers into the new one.
    c.res = undefined;
    c.res = res;
  });

  // The root points a person who opens the base URL at the API reference (curl without -L prints why).
  app.get('/', (c) => c.text('The API reference is at /docs\n', 302, { location: '/docs' }));
  app.route('/', serviceRoutes());
  app.route('/', probeRoutes(deps.config.metrics.public));
  app.route('/', identityRoutes());
  app.route('/', definitionRoutes());
  app.route('/', instanceRoutes());
  app.route('/', alterationRoutes());
  const streams = new TenantCounter(deps.config.shares.eventStreamsPerTenant, deps.config.shares.eventStreamsPerNode);
  deps.metrics?.watchEventStreams(() => streams.total);
  app.route('/', planEventRoutes(streams, deps.shutdown));
  app.route('/', connectionRoutes());
  app.route('/', catalogRoutes());

  app.openAPIRegistry.registerComponent('securitySchemes', 'ApiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'Authorization',
    description: 'Authorization: ApiKey <key>',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'Bearer', {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
  });
  documentProblems(app.openAPIRegistry);
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Workflow alterations API',
      version: '0.1.0',
      description:
        'Bulk, safe alterations of long-lived workflow instances. Each operation names the permission it requires in `x-permission` (structured and legacy models).\n\n' +
        'Input rule for every operation: strings (in bodies, query values and path parameters) contain no NUL character and are well-formed Unicode; JSON bodies are nested at most 64 levels deep; integers are 32-bit; paging cursors are the ones the service issued. A violation is a 400 whose `errors[].path` names the field.',
    },
  });

  const allowed = methodNotAllowed(app.routes);
  app.notFound((c) => {
    const allow = allowed(c.req.path);
    if (allow)
      return problem(c, 405, `${c.req.method} is not supported on ${c.req.path}; use ${allow}`, undefined, { allow });
    return problem(c, 404, `No route for ${c.req.method} ${c.req.path}`);
  });
  app.onError(handleError);
  return app;
}

export type App = ReturnType<typeof createApp>;
