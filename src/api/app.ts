import { auditRoutes } from './routes/audit.js';
import { auditTrail, successStatuses } from './audit-trail.js';
import { OpenAPIHono } from '@hono/zod-openapi';
import { requestPool } from '../db/pool.js';
import { tenantKey } from '../auth/principal.js';
import { throttledClient } from '../auth/throttle.js';
import { EventLoopLoad, RequestScheduler, TenantCounter, TenantGate } from '../shares.js';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { NodeBusyError } from '../errors.js';
import { AbandonedError } from '../vocabulary/time-slice.js';
import { identify } from './authorize.js';
import { type AppDeps, type AppEnv, clientAddress } from './context.js';
import { CachedProbes } from './health-checks.js';
import { methodNotAllowed } from './methods.js';
import { documentProblems } from './openapi-problems.js';
import { handleError, problem, zodFieldErrors } from './problem.js';
import { closeAfter, formBodyMax, settleBody } from './request-body.js';
import { awaitBody, bufferedBytesMax, RequestTimeoutError } from './body-arrival.js';
import { traceRequests } from './tracing.js';
import { alterationRoutes } from './routes/alterations.js';
import { governanceRoutes } from './routes/governance.js';
import { planEventRoutes } from './routes/plan-events.js';
import { catalogRoutes } from './routes/catalogs.js';
import { connectionRoutes } from './routes/connections.js';
import { definitionRoutes } from './routes/definitions.js';
import { identityRoutes } from './routes/identity.js';
import { instanceRoutes } from './routes/instances.js';
import { probeRoutes } from './routes/probes.js';
import { serviceRoutes } from './routes/service.js';
import { isProbePath, requestLog } from './request-log.js';

/**
 * A request without a principal holds its place at least this long (src/shares.ts): with the default 4
 * places, at most 100 anonymous requests a second per node. Each costs the node about a millisecond however
 * small its answer (measured: 1,000 `/health/live` a second from 64 connections kept it 97% busy), and
 * nothing else bounds their rate; probes and sign-ins need far fewer.
 */
const ANONYMOUS_MIN_HOLD_MS = 40;
/**
 * The probes' share is per client (an address, an IPv6 /64): 2 places, each held at least 20 ms, so at most
 * 100 probes a second from one client, whose flood waits behind itself while an orchestrator's probe from
 * elsewhere answers at once, and a tenant's requests keep their time.
 */
const PROBE_PLACES_PER_CLIENT = 2;
const PROBE_MIN_HOLD_MS = 20;
/** API connections no tenant's requests take: credential checks and `/health` always find one. */
const RESERVED_CONNECTIONS = 2;

/** Builds the HTTP app from its dependencies; tests drive it in process with `app.request()`. */
export function createApp(given: AppDeps) {
  const deps: AppDeps = {
    ...given,
    probes: given.probes ?? new CachedProbes(given),
    blockedAddresses: given.blockedAddresses ?? new Map(),
  };
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
  app.use('*', requestLog(deps, { level: deps.config.requestLogLevel, trustRequestId: true }));

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
  // curl output) starts on its own line: written so by `c.json` here and by `problem`, serialized once
  // (an answer used to be read back and copied, the cost of a large page twice over).
  app.use('*', async (c, next) => {
    const json = (object: unknown, arg?: unknown, headers?: Record<string, string>) =>
      c.body(`${JSON.stringify(object)}\n`, arg as ContentfulStatusCode, {
        'Content-Type': 'application/json',
        ...headers,
      });
    c.json = json as unknown as typeof c.json;
    await next();
  });

  // The node's time is a share too (contract section 8): a tenant has at most TENANT_API_REQUESTS requests
  // in flight on this node, and requests without a principal (public routes, failed credentials) at most
  // ANONYMOUS_API_REQUESTS; the rest wait their turn in their own queue, first come first served, while
  // other tenants' requests go on (a 503 after the acquire timeout). The credentials are checked first,
  // once (`identify`; `authorize` reads the result), so that the request is counted as its tenant's.
  //
  // No client holds a share by being slow: the body is read first (src/api/body-arrival.ts), within
  // REQUEST_BODY_TIMEOUT_MS, and only then does the request wait for its place. The probes sit outside the
  // anonymous share, in one of their own per client: an orchestrator's liveness check must answer whatever
  // anonymous clients do, and a flood of probes is bounded like any other anonymous flood.
  const inFlight = new RequestScheduler(deps.config.shares.apiRequestsPerTenant, new EventLoopLoad());
  const anonymous = new TenantGate(deps.config.shares.anonymousApiRequests, ANONYMOUS_MIN_HOLD_MS);
  const readAhead = {
    // The larger of the two bodies a request may carry: JSON (MAX_BODY_BYTES) or a console form.
    limit: formBodyMax(deps.config.maxBodyBytes),
    timeoutMs: deps.config.requestBodyTimeoutMs,
    budget: bufferedBytesMax(deps.config.maxBodyBytes),
  };
  const probes = new TenantGate(PROBE_PLACES_PER_CLIENT, PROBE_MIN_HOLD_MS);
  app.use('*', async (c, next) => {
    const waitMs = deps.apiAcquireTimeoutMs ?? 5_000;
    if (isProbePath(c.req.path)) {
      let release: () => void;
      try {
        release = await probes.acquire(`probe:${throttledClient(clientAddress(c))}`, waitMs, c.req.raw.signal);
      } catch {
        if (c.req.raw.signal.aborted) throw new AbandonedError('the client went away while its probe waited its turn');
        throw new NodeBusyError(`This client's probes found no turn within ${waitMs} ms; retry later`, 1);
      }
      try {
        return await next();
      } finally {
        release();
      }
    }
    const identity = await identify(c);
    c.set('identity', identity);
    const principal = 'principal' in identity ? identity.principal : undefined;
    const gate = principal ? inFlight : anonymous;
    const key = principal ? `tenant:${tenantKey(principal.tenantId)}` : 'anonymous';
    let releaseBody: () => void;
    try {
      releaseBody = await awaitBody(c, readAhead);
    } catch (err) {
      // Part of the body is unread: the answer closes the connection.
      if (err instanceof RequestTimeoutError || err instanceof NodeBusyError) closeAfter(c);
      throw err;
    }
    let release: () => void;
    try {
      release = await gate.acquire(key, waitMs, c.req.raw.signal);
    } catch {
      releaseBody();
      if (c.req.raw.signal.aborted) throw new AbandonedError('the client went away while its request waited its turn');
      throw new NodeBusyError(
        principal
          ? `This tenant's requests in flight on this node (TENANT_API_REQUESTS) found no turn within ${waitMs} ms; retry later`
          : `Requests without credentials had ${gate.perTenant} in flight on this node (ANONYMOUS_API_REQUESTS) for ${waitMs} ms; retry later`,
        1,
      );
    }
    try {
      await next();
    } finally {
      release();
      releaseBody();
    }
  });

  // The audit trail (src/api/audit-trail.ts), once the request knows whose it is. A route's status on success is
  // the lowest 2xx its OpenAPI operation documents; the console's forms answer 303.
  let successes: Map<string, number> | undefined;
  const successStatus = (method: string, route: string) => {
    successes ??= successStatuses(app.openAPIRegistry.definitions);
    return successes.get(`${method} ${route}`) ?? (route.startsWith('/console/') ? 303 : undefined);
  };
  if (deps.auditTrail !== false) app.use('*', auditTrail(deps.pool, successStatus));

  // The root points a person who opens the base URL at the API reference (curl without -L prints why).
  app.get('/', (c) => c.text('The API reference is at /docs\n', 302, { location: '/docs' }));
  app.route('/', serviceRoutes());
  app.route('/', probeRoutes(deps.config.metrics.public));
  app.route('/', identityRoutes());
  app.route('/', definitionRoutes());
  app.route('/', instanceRoutes());
  // Before the plan routes: /alterations/policy is not a plan id.
  app.route('/', governanceRoutes());
  app.route('/', alterationRoutes());
  const streams = new TenantCounter(deps.config.shares.eventStreamsPerTenant, deps.config.shares.eventStreamsPerNode);
  deps.metrics?.watchEventStreams(() => streams.total);
  app.route('/', planEventRoutes(streams, deps.shutdown));
  // The operator's console (src/console/surface.ts): its pages' event streams share the API's count per tenant.
  for (const surface of deps.surfaces ?? [])
    app.route(surface.path, surface.routes({ streams, shutdown: deps.shutdown }));
  app.route('/', connectionRoutes());
  app.route('/', catalogRoutes());
  app.route('/', auditRoutes());

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
