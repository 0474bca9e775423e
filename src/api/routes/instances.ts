import { OpenAPIHono, z } from '@hono/zod-openapi';
import { triggerEvent } from '../../engine/events.js';
import { createInstance, getInstanceView } from '../../engine/instances.js';
import { type AppEnv, callerTenant } from '../context.js';
import { Int32 } from '../input.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

const EXECUTE = { structured: 'workflows/instances:execute', legacy: 'exec:workflow-definitions' };

const CreateInstanceSchema = z
  .strictObject({
    definitionId: z.string().min(1),
    version: Int32.min(1).optional(),
    name: z.string().max(500).optional(),
    correlationId: z.string().max(500).optional(),
    variables: z.record(z.string(), z.unknown()).optional().openapi({ description: 'Initial values by variable id' }),
  })
  .openapi('CreateWorkflowInstanceRequest');

const InstanceSchema = z
  .object({
    id: z.string(),
    definitionId: z.string(),
    definitionVersionId: z.string(),
    version: z.number().int(),
    name: z.string().nullable(),
    correlationId: z.string().nullable(),
    status: z.enum(['Running', 'Finished']),
    subStatus: z.enum(['Pending', 'Executing', 'Suspended', 'Finished', 'Cancelled', 'Faulted']),
    isSystem: z.boolean(),
    incidentCount: z.number().int(),
    incidents: z.array(z.object({ activityId: z.string(), activityType: z.string(), message: z.string(), timestamp: z.string() })),
    variables: z.array(z.object({ id: z.string(), name: z.string(), typeName: z.string(), value: z.unknown() })),
    scheduledActivityIds: z.array(z.string()),
    bookmarks: z.array(z.object({ activityId: z.string(), eventName: z.string() })),
    activityRecords: z.array(
      z.object({
        activityId: z.string(),
        nodeId: z.string(),
        activityType: z.string(),
        name: z.string().nullable(),
        status: z.enum(['Running', 'Completed', 'Canceled', 'Faulted']),
        inputs: z.record(z.string(), z.unknown()),
        startedAt: z.string(),
        completedAt: z.string().nullable(),
      }),
    ),
    journal: z.array(z.object({ activityId: z.string(), message: z.string(), timestamp: z.string() })),
    createdAt: z.string(),
    updatedAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .openapi('WorkflowInstance');

const create = secureRoute(EXECUTE, {
  method: 'post',
  path: '/workflow-instances',
  tags: ['Workflow instances'],
  summary: 'Start an instance of a definition (stored, then dispatched to a worker)',
  request: jsonBody(CreateInstanceSchema),
  responses: {
    202: jsonContent(z.object({ workflowInstanceId: z.string() }), 'Stored as Running/Pending and dispatched'),
    ...BODY_ROUTE_PROBLEMS,
  },
});

const read = secureRoute(
  { structured: 'workflows/instances:view', legacy: 'read:workflow-instances' },
  {
    method: 'get',
    path: '/workflow-instances/{id}',
    tags: ['Workflow instances'],
    summary: 'Read an instance with its variables, bookmarks, incidents, activity records and journal',
    request: { params: z.object({ id: z.string() }) },
    responses: { 200: jsonContent(InstanceSchema, 'The instance'), ...problems(401, 403, 404) },
  },
);

const trigger = secureRoute(EXECUTE, {
  method: 'post',
  path: '/events/{eventName}/trigger',
  tags: ['Workflow instances'],
  summary: 'Resume every suspended instance of the tenant waiting on the event',
  request: {
    params: z.object({ eventName: z.string().min(1) }),
    ...jsonBody(
      z
        .strictObject({ correlationId: z.string().optional(), workflowInstanceId: z.string().optional() })
        .openapi('TriggerEventRequest'),
    ),
  },
  responses: {
    200: jsonContent(z.object({ resumedWorkflowInstanceIds: z.array(z.string()) }), 'The resumed instances'),
    ...BODY_ROUTE_PROBLEMS,
  },
});

export function instanceRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(create, async (c) => {
    const { pool, dispatcher } = c.get('deps');
    const id = await createInstance(pool, callerTenant(c), c.req.valid('json'));
    await dispatcher.dispatch([id]);
    c.header('Location', `/workflow-instances/${id}`);
    return c.json({ workflowInstanceId: id }, 202);
  });
  app.openapi(read, async (c) => {
    const { pool, definitions } = c.get('deps');
    const view = await getInstanceView(pool, definitions, callerTenant(c), c.req.valid('param').id);
    return c.json(view as z.infer<typeof InstanceSchema>, 200);
  });
  app.openapi(trigger, async (c) => {
    const { pool, definitions, dispatcher } = c.get('deps');
    const { eventName } = c.req.valid('param');
    const result = await triggerEvent(pool, definitions, callerTenant(c), eventName, c.req.valid('json'));
    await dispatcher.dispatch(result.toDispatch);
    return c.json({ resumedWorkflowInstanceIds: result.resumedWorkflowInstanceIds }, 200);
  });
  return app;
}
