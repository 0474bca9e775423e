import { OpenAPIHono } from '@hono/zod-openapi';
import { bodyLimit } from 'hono/body-limit';
import { newId } from '../ids.js';
import type { AppDeps, AppEnv } from './context.js';
import { handleError, problem, zodFieldErrors } from './problem.js';
import { alterationRoutes } from './routes/alterations.js';
import { catalogRoutes } from './routes/catalogs.js';
import { connectionRoutes } from './routes/connections.js';
import { definitionRoutes } from './routes/definitions.js';
import { identityRoutes } from './routes/identity.js';
import { instanceRoutes } from './routes/instances.js';
import { serviceRoutes } from './routes/service.js';

const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;

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
    logger.info(
      {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
        principal: principal ? principal.id : undefined,
      },
      'request',
    );
  });

  // A body must be JSON (415) and at most MAX_BODY_BYTES (413), checked before anything reads it.
  app.use('*', async (c, next) => {
    const hasBody = (c.req.header('content-length') ?? '0') !== '0' || c.req.header('transfer-encoding') !== undefined;
    if (hasBody && ['POST', 'PUT', 'PATCH'].includes(c.req.method)) {
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim();
      if (!JSON_TYPE.test(type)) return problem(c, 415, `Request bodies must be application/json, not "${type || 'none'}"`);
    }
    return next();
  });
  app.use(
    '*',
    bodyLimit({
      maxSize: deps.config.maxBodyBytes,
      onError: (c) => problem(c, 413, `The request body is larger than ${deps.config.maxBodyBytes} bytes`),
    }),
  );

  app.route('/', serviceRoutes());
  app.route('/', identityRoutes());
  app.route('/', definitionRoutes());
  app.route('/', instanceRoutes());
  app.route('/', alterationRoutes());
  app.route('/', connectionRoutes());
  app.route('/', catalogRoutes());

  app.openAPIRegistry.registerComponent('securitySchemes', 'ApiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'Authorization',
    description: 'Authorization: ApiKey <key>',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'Bearer', { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Workflow alterations API',
      version: '0.1.0',
      description:
        'Bulk, safe alterations of long-lived workflow instances. Each operation names the permission it requires in `x-permission` (structured and legacy models).',
    },
  });

  app.notFound((c) => problem(c, 404, `No route for ${c.req.method} ${c.req.path}`));
  app.onError(handleError);
  return app;
}

export type App = ReturnType<typeof createApp>;
