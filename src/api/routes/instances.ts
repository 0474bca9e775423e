import { OpenAPIHono, z } from '@hono/zod-openapi';
import { INSTANCES_EXECUTE, INSTANCES_VIEW } from '../../auth/route-permissions.js';
import { triggerEvent } from '../../engine/events.js';
import { listInstancesJson } from '../../engine/instance-list.js';
import { createInstance, getInstanceView } from '../../engine/instances.js';
import {
  InstanceStatusSchema,
  IncidentGroupSchema,
  InstanceSubStatusSchema,
  InstanceSummarySchema,
  InstanceViewSchema,
} from '../../engine/instance-views.js';
import { type AppEnv, callerTenant } from '../context.js';
import { openAfter, sealCursor } from '../cursor.js';
import { Int32, QueryInt32 } from '../../vocabulary/input.js';
import { listIncidentGroups } from '../../engine/incident-groups.js';
import { listInstanceChanges } from '../../alterations/instance-changes.js';
import { InstanceChangeSchema } from '../../alterations/views.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent, NextCursor, PAGING, problems } from '../schemas.js';
import { bodyRoute, byIdRoute } from '../route-shapes.js';
import { secureRoute } from '../secure-route.js';
import { writtenJson } from '../written-json.js';

const EXECUTE = INSTANCES_EXECUTE;
const VIEW = INSTANCES_VIEW;

const CreateInstanceSchema = z
  .strictObject({
    definitionId: z.string().min(1),
    version: Int32.min(1).optional(),
    name: z.string().max(500).optional(),
    correlationId: z.string().max(500).optional(),
    variables: z.record(z.string(), z.unknown()).optional().openapi({ description: 'Initial values by variable id' }),
  })
  .openapi('CreateWorkflowInstanceRequest');

/** The list's filters: each an exact match, except searchTerm (the alteration filter's substring search). */
const ListQuerySchema = z.strictObject({
  definitionId: z.string().min(1).max(1024).optional().openapi({ description: 'Exact definition id (any version)' }),
  status: InstanceStatusSchema.optional(),
  subStatus: InstanceSubStatusSchema.optional(),
  correlationId: z.string().max(1024).optional().openapi({ description: 'Exact correlation id' }),
  searchTerm: z
    .string()
    .max(1024)
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\u0000-\u001f]*$/, 'searchTerm must not contain control characters')
    .optional()
    .openapi({
      description:
        'Case-insensitive substring of the id, name, correlation id, definition id or definition version id (`%` and `_` are literal); empty is no constraint',
    }),
  ...PAGING,
});

const create = bodyRoute(EXECUTE, 'post', '/workflow-instances', {
  tags: ['Workflow instances'],
  summary: 'Start an instance of a definition (stored with its pure steps run, then its workflow is told)',
  body: CreateInstanceSchema,
  answer: {
    202: jsonContent(
      z.object({ workflowInstanceId: z.string() }),
      'Stored, its steps run up to its first wait or outbound call, its workflow told through the outbox',
    ),
  },
});

const list = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-instances',
  tags: ['Workflow instances'],
  summary: "A page of the tenant's instances, newest first; filters combine with AND",
  request: { query: ListQuerySchema },
  responses: {
    200: jsonContent(
      z.object({
        items: z.array(InstanceSummarySchema),
        nextCursor: NextCursor,
      }),
      'A page of instances',
    ),
    ...problems(400, 401, 403),
  },
});

const incidents = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-instances/incidents',
  tags: ['Workflow instances'],
  summary:
    "The tenant's open incidents grouped by definition, version, activity and message (its first 200 characters), largest group first",
  request: {
    query: z.strictObject({
      definitionId: z.string().min(1).max(1024).optional().openapi({ description: 'Only this definition' }),
      after: PAGING.after,
      limit: QueryInt32.min(1).max(100).default(20),
    }),
  },
  responses: {
    200: jsonContent(z.object({ items: z.array(IncidentGroupSchema), nextCursor: NextCursor }), 'A page of groups'),
    ...problems(400, 401, 403),
  },
});

const changes = secureRoute(VIEW, {
  method: 'get',
  path: '/workflow-instances/{id}/alterations',
  tags: ['Workflow instances'],
  summary: "Every plan's job that touched the instance, newest first, with its status and log",
  request: {
    params: z.object({ id: z.string() }),
    query: z.strictObject({ after: PAGING.after, limit: QueryInt32.min(1).max(100).default(20) }),
  },
  responses: {
    200: jsonContent(z.object({ items: z.array(InstanceChangeSchema), nextCursor: NextCursor }), 'A page of changes'),
    ...problems(400, 401, 403, 404),
  },
});

const read = byIdRoute(VIEW, 'get', '/workflow-instances/{id}', {
  tags: ['Workflow instances'],
  summary: 'Read an instance with its variables, bookmarks, incidents, activity records and journal',
  answer: { 200: jsonContent(InstanceViewSchema, 'The instance') },
});

const trigger = secureRoute(EXECUTE, {
  method: 'post',
  path: '/events/{eventName}/trigger',
  tags: ['Workflow instances'],
  summary: 'Resume every suspended instance of the tenant waiting on the event',
  description:
    'Up to TRIGGER_INLINE_INSTANCES instances (1,000 by default) are resumed before the answer: their steps up to ' +
    'the next wait or outbound call have run. A trigger that reaches more records their resumption and answers ' +
    'once that committed; workers then resume them, oldest first and tenants in turn, and until then they stay ' +
    'Suspended with their bookmark. Either way each listed instance is resumed once: an instance whose ' +
    'resumption on the event is recorded already is not listed again. The header Wfa-Resumption says which: ' +
    '`inline` (resumed) or `recorded` (to be resumed by the workers).',
  request: {
    params: z.object({ eventName: z.string().min(1) }),
    ...jsonBody(
      z
        .strictObject({ correlationId: z.string().optional(), workflowInstanceId: z.string().optional() })
        .openapi('TriggerEventRequest'),
    ),
  },
  responses: {
    200: {
      ...jsonContent(z.object({ resumedWorkflowInstanceIds: z.array(z.string()) }), 'The resumed instances'),
      headers: z.object({
        'Wfa-Resumption': z
          .enum(['inline', 'recorded'])
          .openapi({ description: 'inline: resumed before the answer; recorded: the workers resume them next' }),
      }),
    },
    ...BODY_ROUTE_PROBLEMS,
  },
});

export function instanceRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(create, async (c) => {
    const { pool, definitions } = c.get('deps');
    const id = await createInstance(pool, definitions, callerTenant(c), c.req.valid('json'));
    c.header('Location', `/workflow-instances/${id}`);
    return c.json({ workflowInstanceId: id }, 202);
  });
  app.openapi(list, async (c) => {
    const { pool, tokens } = c.get('deps');
    const query = c.req.valid('query');
    const after = openAfter(tokens.key, query.after);
    const page = await listInstancesJson(pool, callerTenant(c), { ...query, after });
    // The items as Postgres wrote them (src/engine/instance-list.ts): joined, not parsed and serialized again.
    return writtenJson(
      c,
      `{"items":${page.itemsJson},"nextCursor":${JSON.stringify(sealCursor(tokens.key, page.nextCursor))}}\n`,
    );
  });
  // Before `/workflow-instances/{id}`: "incidents" is not an instance id.
  app.openapi(incidents, async (c) => {
    const { pool, tokens } = c.get('deps');
    const query = c.req.valid('query');
    const page = await listIncidentGroups(pool, callerTenant(c), {
      ...query,
      after: openAfter(tokens.key, query.after),
    });
    return c.json({ items: page.items, nextCursor: sealCursor(tokens.key, page.nextCursor) }, 200);
  });
  app.openapi(changes, async (c) => {
    const { pool, tokens } = c.get('deps');
    const query = c.req.valid('query');
    const page = await listInstanceChanges(pool, callerTenant(c), c.req.valid('param').id, {
      after: openAfter(tokens.key, query.after),
      limit: query.limit,
    });
    return c.json({ items: page.items, nextCursor: sealCursor(tokens.key, page.nextCursor) }, 200);
  });
  app.openapi(read, async (c) => {
    const { pool, definitions } = c.get('deps');
    const view = await getInstanceView(pool, definitions, callerTenant(c), c.req.valid('param').id);
    return c.json(view, 200);
  });
  app.openapi(trigger, async (c) => {
    const { pool, definitions, config } = c.get('deps');
    const { eventName } = c.req.valid('param');
    const result = await triggerEvent(
      pool,
      definitions,
      callerTenant(c),
      eventName,
      c.req.valid('json'),
      config.triggerInlineInstances,
    );
    c.header('Wfa-Resumption', result.queued ? 'recorded' : 'inline');
    return c.json({ resumedWorkflowInstanceIds: result.resumedWorkflowInstanceIds }, 200);
  });
  return app;
}
