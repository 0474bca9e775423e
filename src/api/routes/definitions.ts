import { OpenAPIHono, z } from '@hono/zod-openapi';
import { WorkflowDefinitionRequestSchema } from '../../engine/definition-schema.js';
import { type DefinitionVersion, findDefinition, listLatestDefinitions, publishDefinition } from '../../engine/definitions.js';
import { NotFoundError } from '../../errors.js';
import { type AppEnv, callerTenant } from '../context.js';
import { QueryInt32 } from '../../vocabulary/input.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

export const DefinitionSchema = z
  .object({
    id: z.string().openapi({ description: 'The definition version id' }),
    definitionId: z.string(),
    version: z.number().int(),
    isLatest: z.boolean(),
    isPublished: z.boolean(),
    name: z.string().nullable(),
    description: z.string().nullable(),
    variables: z.array(z.any()),
    root: z.any(),
    options: z.object({ usableAsActivity: z.boolean() }),
    createdAt: z.string(),
  })
  .openapi('WorkflowDefinition');

function toJson(d: DefinitionVersion) {
  return {
    id: d.id,
    definitionId: d.definitionId,
    version: d.version,
    isLatest: d.isLatest,
    isPublished: d.isPublished,
    name: d.name,
    description: d.description,
    variables: d.variables,
    root: d.root,
    options: d.options,
    createdAt: d.createdAt.toISOString(),
  };
}

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
    return c.json(toJson(def), 201);
  });
  app.openapi(read, async (c) => {
    const { pool } = c.get('deps');
    const { definitionId } = c.req.valid('param');
    const { version } = c.req.valid('query');
    const def = await findDefinition(pool, callerTenant(c), definitionId, version);
    if (!def) {
      throw new NotFoundError(`Workflow definition ${definitionId}${version === undefined ? '' : ` version ${version}`} not found`);
    }
    return c.json(toJson(def), 200);
  });
  app.openapi(list, async (c) => {
    const { pool } = c.get('deps');
    const items = (await listLatestDefinitions(pool, callerTenant(c))).map(toJson);
    return c.json({ items, totalCount: items.length }, 200);
  });
  return app;
}
