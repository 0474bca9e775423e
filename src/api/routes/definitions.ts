import { OpenAPIHono, z } from '@hono/zod-openapi';
import { WorkflowDefinitionRequestSchema } from '../../engine/definition-schema.js';
import { findDefinition, listLatestDefinitions, publishDefinition } from '../../engine/definitions.js';
import { DefinitionSchema, definitionView } from '../../engine/definition-views.js';
import { NotFoundError } from '../../errors.js';
import { type AppEnv, callerTenant } from '../context.js';
import { QueryInt32 } from '../../vocabulary/input.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

const VIEW = { structured: 'workflows/definitions:view', legacy: 'read:workflow-definitions' };

const publish = secureRoute(
  { structured: 'workflows/definitions:create', legacy: 'write:workflow-definitions' },
  {
    method: 'post',
    path: '/workflow-definitions',
    tags: ['Workflow definitions'],
    summary: 'Publish the next version of a workflow definition (version 3 JSON)',
    request: jsonBody(WorkflowDefinitionRequestSchema),
    responses: { 201: jsonContent(DefinitionSchema, 'The published version, now the latest'), ...BODY_ROUTE_PROBLEMS },
  },
);

const read = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-definitions/{definitionId}',
  tags: ['Workflow definitions'],
  summary: 'Read the latest version of a definition, or ?version=N',
  request: {
    params: z.object({ definitionId: z.string() }),
    query: z.strictObject({ version: QueryInt32.min(1).optional() }),
  },
  responses: { 200: jsonContent(DefinitionSchema, 'The definition version'), ...problems(400, 401, 403, 404) },
});

const list = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-definitions',
  tags: ['Workflow definitions'],
  summary: 'List the latest version of every definition, by definition id',
  responses: {
    200: jsonContent(z.object({ items: z.array(DefinitionSchema), totalCount: z.number().int() }), 'Latest versions'),
    ...problems(401, 403),
  },
});

export function definitionRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(publish, async (c) => {
    const { pool } = c.get('deps');
    const def = await publishDefinition(pool, callerTenant(c), c.req.valid('json'));
    c.header('Location', `/workflow-definitions/${encodeURIComponent(def.definitionId)}?version=${def.version}`);
    return c.json(definitionView(def), 201);
  });
  app.openapi(read, async (c) => {
    const { pool } = c.get('deps');
    const { definitionId } = c.req.valid('param');
    const { version } = c.req.valid('query');
    const def = await findDefinition(pool, callerTenant(c), definitionId, version);
    if (!def) {
      throw new NotFoundError(
        `Workflow definition ${definitionId}${version === undefined ? '' : ` version ${version}`} not found`,
      );
    }
    return c.json(definitionView(def), 200);
  });
  app.openapi(list, async (c) => {
    const { pool } = c.get('deps');
    const items = (await listLatestDefinitions(pool, callerTenant(c))).map(definitionView);
    return c.json({ items, totalCount: items.length }, 200);
  });
  return app;
}
