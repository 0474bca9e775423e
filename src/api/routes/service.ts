import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { OpenAPIHono, z } from '@hono/zod-openapi';
import type { AppEnv } from '../context.js';
import { readiness } from '../health-checks.js';
import { jsonContent } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

const CheckSchema = z.enum(['ok', 'unavailable']);
const HealthSchema = z
  .object({
    status: z.enum(['ok', 'unavailable']),
    checks: z.object({ postgres: CheckSchema, temporal: CheckSchema }),
    detail: z.string().optional().openapi({ description: 'Why a check fails when the service knows' }),
  })
  .openapi('Health');

const health = secureRoute('public', {
  method: 'get',
  path: '/health',
  tags: ['Service'],
  summary: 'Readiness: Postgres and Temporal are reachable',
  responses: {
    200: jsonContent(HealthSchema, 'Both dependencies answer'),
    503: jsonContent(HealthSchema, 'A dependency is down: its check says "unavailable"'),
  },
});

const SWAGGER_ASSETS = new Set([
  'swagger-ui.css',
  'swagger-ui-bundle.js',
  'swagger-ui-standalone-preset.js',
  'favicon-32x32.png',
]);

/**
 * The folder of the swagger-ui-dist package, found without loading it: its main module runs the 3.5 MB browser
 * bundle in Node (10 MB of heap and 40 MB of RSS, measured, for a page the service only serves as files).
 */
const SWAGGER_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Workflow alterations API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#ui', deepLinking: true });</script>
</body></html>`;

export function serviceRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(health, async (c) => {
    const deps = c.get('deps');
    // Through no tenant's share (the probe answers whatever the tenants' requests hold), from a result at
    // most a second old (src/api/health-checks.ts).
    const { checks, detail } = deps.probes ? await deps.probes.readiness() : await readiness(deps);
    const ok = checks.postgres === 'ok' && checks.temporal === 'ok';
    return c.json(
      {
        status: ok ? ('ok' as const) : ('unavailable' as const),
        checks: { postgres: checks.postgres, temporal: checks.temporal },
        ...(detail ? { detail } : {}),
      },
      ok ? 200 : 503,
    );
  });
  // The reference page is served from the swagger-ui-dist package: it works offline.
  app.get('/docs', (c) => c.html(DOCS_HTML));
  app.get('/docs/assets/:file', async (c) => {
    const file = c.req.param('file');
    if (!SWAGGER_ASSETS.has(file)) return c.notFound();
    const body = await readFile(path.join(SWAGGER_DIR, file));
    const type = file.endsWith('.css') ? 'text/css' : file.endsWith('.png') ? 'image/png' : 'text/javascript';
    return c.body(body, 200, { 'content-type': type, 'cache-control': 'public, max-age=86400' });
  });
  return app;
}
