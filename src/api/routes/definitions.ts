import { OpenAPIHono, z } from '@hono/zod-openapi';
import { DEFINITIONS_VIEW, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { activityCounts } from '../../engine/incident-groups.js';
import { ActivityCountsSchema } from '../../engine/instance-views.js';
import { WorkflowDefinitionRequestSchema } from '../../engine/definition-schema.js';
import { findDefinition, listLatestDefinitions, publishDefinition } from '../../engine/definitions.js';
import { loadMigrationDraft } from '../../engine/migration-draft.js';
import {
  DefinitionSchema,
  DefinitionSummarySchema,
  definitionSummaryView,
  definitionView,
} from '../../engine/definition-views.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import type { Queryable } from '../../db/pool.js';
import { openCursor, sealCursor } from '../cursor.js';
import { type AppEnv, callerTenant } from '../context.js';
import { QueryInt32 } from '../../vocabulary/input.js';
import { jsonContent, NextCursor, PAGING, problems } from '../schemas.js';
import { bodyRoute } from '../route-shapes.js';
import { secureRoute } from '../secure-route.js';

/** A definitions page's cursor: the last definition id it held (sealed with the signing key like every cursor). */
const encodeAfter = (definitionId: string) => Buffer.from(JSON.stringify(['wd', definitionId])).toString('base64url');
function openDefinitionCursor(key: Uint8Array, sealed: string): string {
  const parts = JSON.parse(Buffer.from(openCursor(key, sealed), 'base64url').toString('utf8')) as unknown;
  if (Array.isArray(parts) && parts[0] === 'wd' && typeof parts[1] === 'string') return parts[1];
  throw new ValidationError('The cursor is not valid', [
    { path: '/query/after', message: 'Not a cursor returned by this endpoint' },
  ]);
}

const VIEW = DEFINITIONS_VIEW;

/** A route about one version of a definition: the latest, or ?version=N. */
const ONE_VERSION = {
  params: z.object({ definitionId: z.string() }),
  query: z.strictObject({ version: QueryInt32.min(1).optional() }),
};

/** The latest version, or the given one, of a definition of the tenant; a 404 naming it when there is none. */
async function foundDefinition(db: Queryable, tenantKey: string, definitionId: string, version: number | undefined) {
  const def = await findDefinition(db, tenantKey, definitionId, version);
  if (!def)
    throw new NotFoundError(
      `Workflow definition ${definitionId}${version === undefined ? '' : ` version ${version}`} not found`,
    );
  return def;
}

const publish = bodyRoute(
  { structured: 'workflows/definitions:create', legacy: 'write:workflow-definitions' },
  'post',
  '/workflow-definitions',
  {
    tags: ['Workflow definitions'],
    summary: 'Publish the next version of a workflow definition (version 3 JSON)',
    body: WorkflowDefinitionRequestSchema,
    answer: { 201: jsonContent(DefinitionSchema, 'The published version, now the latest') },
  },
);

const read = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-definitions/{definitionId}',
  tags: ['Workflow definitions'],
  summary: 'Read the latest version of a definition, or ?version=N',
  request: ONE_VERSION,
  responses: { 200: jsonContent(DefinitionSchema, 'The definition version'), ...problems(400, 401, 403, 404) },
});

const list = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-definitions',
  tags: ['Workflow definitions'],
  summary:
    'A page of the latest version of every definition, by definition id, as summaries (read one for its flowchart)',
  request: {
    query: z.strictObject(PAGING),
  },
  responses: {
    200: jsonContent(
      z.object({
        items: z.array(DefinitionSummarySchema),
        totalCount: z.number().int().openapi({ description: 'How many definitions the tenant has' }),
        nextCursor: NextCursor,
      }),
      'Latest versions',
    ),
    ...problems(400, 401, 403),
  },
});

const MigrationDraftSchema = z
  .object({
    definitionId: z.string(),
    from: z.number().int(),
    to: z.number().int(),
    mappings: z.array(
      z.object({
        source: z.string(),
        target: z.string(),
        reason: z.enum(['sameId', 'sameTypeAndName']),
      }),
    ),
    unmapped: z.array(z.object({ activityId: z.string(), type: z.string(), name: z.string().nullable() })),
  })
  .openapi('MigrationDraft');

const draft = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-definitions/{definitionId}/migration-draft',
  tags: ['Workflow definitions'],
  summary:
    "A first draft of a Migrate's activityMappings from one version to another: equal ids, then the one activity with the same type and name; the rest unmapped",
  request: {
    params: z.object({ definitionId: z.string() }),
    query: z.strictObject({ from: QueryInt32.min(1), to: QueryInt32.min(1) }),
  },
  responses: { 200: jsonContent(MigrationDraftSchema, 'The draft'), ...problems(400, 401, 403, 404) },
});

const counts = secureRoute(INSTANCES_VIEW, {
  method: 'get',
  path: '/workflow-definitions/{definitionId}/activity-counts',
  tags: ['Workflow definitions'],
  summary:
    "How many of a version's unfinished instances wait on each of its activities, have it scheduled, or have an incident on it (the latest version, or ?version=N); every activity listed, zeros included",
  request: ONE_VERSION,
  responses: { 200: jsonContent(ActivityCountsSchema, 'The counts'), ...problems(400, 401, 403, 404) },
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
    const def = await foundDefinition(pool, callerTenant(c), definitionId, version);
    return c.json(definitionView(def), 200);
  });
  app.openapi(counts, async (c) => {
    const { pool } = c.get('deps');
    const { definitionId } = c.req.valid('param');
    const { version } = c.req.valid('query');
    const def = await foundDefinition(pool, callerTenant(c), definitionId, version);
    const items = await activityCounts(pool, callerTenant(c), def.id, def.root.activities);
    return c.json({ definitionId: def.definitionId, version: def.version, items }, 200);
  });
  app.openapi(draft, async (c) => {
    const { definitionId } = c.req.valid('param');
    const { from, to } = c.req.valid('query');
    return c.json(await loadMigrationDraft(c.get('deps').pool, callerTenant(c), definitionId, from, to), 200);
  });
  app.openapi(list, async (c) => {
    const { pool, tokens } = c.get('deps');
    const query = c.req.valid('query');
    const after = query.after === undefined ? undefined : openDefinitionCursor(tokens.key, query.after);
    const page = await listLatestDefinitions(pool, callerTenant(c), { after, limit: query.limit });
    const nextCursor =
      page.nextDefinitionId === null ? null : sealCursor(tokens.key, encodeAfter(page.nextDefinitionId));
    return c.json({ items: page.items.map(definitionSummaryView), totalCount: page.totalCount, nextCursor }, 200);
  });
  return app;
}
