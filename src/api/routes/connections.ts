import { OpenAPIHono, z } from '@hono/zod-openapi';
import {
  connectionNames,
  createConnection,
  deleteConnection,
  getConnection,
  listConnections,
  updateConnection,
} from '../../connections/repository.js';
import { CONNECTION_TYPES, findConnectionType, inputDescriptors } from '../../connections/types.js';
import { ConnectionRequestSchema, ConnectionSchema } from '../../connections/views.js';
import { findActivityType } from '../../engine/activity-types.js';
import { NotFoundError } from '../../errors.js';
import { type AppEnv, callerTenant } from '../context.js';
import { QueryInt32 } from '../../vocabulary/input.js';
import { counted, InputDescriptorSchema, jsonContent, problems } from '../schemas.js';
import { bodyRoute, byIdRoute } from '../route-shapes.js';
import { secureRoute } from '../secure-route.js';

const TAGS = ['Connections'];
/** The connections, and one of them. */
const ALL = '/connection-configuration';
const ONE = '/connection-configuration/{id}';
const SIGNED_IN = { structured: 'signed-in', legacy: 'connections/descriptor:read' } as const;

const create = bodyRoute({ structured: 'connections:create', legacy: 'connections:write' }, 'post', ALL, {
  tags: TAGS,
  summary: 'Create a connection (name unique in the tenant)',
  body: ConnectionRequestSchema,
  answer: { 201: jsonContent(ConnectionSchema, 'Created') },
  conflict: true,
});

const list = secureRoute(
  { structured: 'connections:view', legacy: 'connections:read' },
  {
    method: 'get',
    path: ALL,
    tags: TAGS,
    summary: "The tenant's connections and the tenant-agnostic ones, by name",
    request: {
      query: z.strictObject({
        connectionType: z.string().optional(),
        skip: QueryInt32.min(0).default(0),
        take: QueryInt32.min(1).max(1000).default(100),
      }),
    },
    responses: {
      200: jsonContent(counted(ConnectionSchema), 'A page of connections'),
      ...problems(400, 401, 403),
    },
  },
);

const descriptors = secureRoute(SIGNED_IN, {
  method: 'get',
  path: '/connection-configuration/descriptors',
  tags: TAGS,
  summary: 'The registered connection types',
  responses: {
    200: jsonContent(
      counted(z.object({ type: z.string(), namespace: z.string(), displayName: z.string(), description: z.string() })),
      'The registered types',
    ),
    ...problems(401, 403),
  },
});

const inputDescriptor = secureRoute(SIGNED_IN, {
  method: 'get',
  path: '/connection-configuration/input-descriptor/{type}',
  tags: TAGS,
  summary: 'The fields of a registered connection type (derived from its schema)',
  request: { params: z.object({ type: z.string() }) },
  responses: {
    200: jsonContent(counted(InputDescriptorSchema), 'The fields'),
    ...problems(401, 403, 404),
  },
});

const read = byIdRoute({ structured: 'connections:view', legacy: 'connections:read' }, 'get', ONE, {
  tags: TAGS,
  summary: 'A connection, with its full configuration',
  answer: { 200: jsonContent(ConnectionSchema, 'The connection') },
});

const update = byIdRoute({ structured: 'connections:update', legacy: 'connections:write' }, 'put', ONE, {
  tags: TAGS,
  summary: 'Replace a connection',
  body: ConnectionRequestSchema,
  answer: { 200: jsonContent(ConnectionSchema, 'Updated') },
  conflict: true,
});

const remove = byIdRoute({ structured: 'connections:delete', legacy: 'connections:delete' }, 'delete', ONE, {
  tags: TAGS,
  summary: 'Delete a connection',
  answer: { 204: { description: 'Deleted' } },
});

const options = secureRoute(
  { structured: 'signed-in', legacy: 'signed-in' },
  {
    method: 'get',
    path: '/descriptors/activities/{activityType}/options/{inputName}',
    tags: ['Descriptors'],
    summary: "The tenant's saved connections an activity's connection input can name",
    request: { params: z.object({ activityType: z.string(), inputName: z.string() }) },
    responses: {
      200: jsonContent(
        z.object({ items: z.array(z.object({ text: z.string(), value: z.string() })), refresh: z.boolean() }),
        'The options',
      ),
      ...problems(401, 404),
    },
  },
);

export function connectionRoutes() {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(create, async (c) => {
    const { pool, cipher } = c.get('deps');
    const created = await createConnection(pool, cipher, callerTenant(c), c.req.valid('json'));
    c.header('Location', `/connection-configuration/${created.id}`);
    return c.json(created, 201);
  });
  app.openapi(list, async (c) => {
    const { pool, cipher } = c.get('deps');
    return c.json(await listConnections(pool, cipher, callerTenant(c), c.req.valid('query')), 200);
  });
  // Registered before /{id} so that these paths are not read as ids.
  app.openapi(descriptors, (c) => {
    const items = CONNECTION_TYPES.map((t) => ({
      type: t.type,
      namespace: t.namespace,
      displayName: t.displayName,
      description: t.description,
    }));
    return c.json({ items, totalCount: items.length }, 200);
  });
  app.openapi(inputDescriptor, (c) => {
    const { type } = c.req.valid('param');
    const found = findConnectionType(type);
    if (!found) throw new NotFoundError(`Connection type ${type} is not registered`);
    const items = inputDescriptors(found);
    return c.json({ items: items as z.infer<typeof InputDescriptorSchema>[], totalCount: items.length }, 200);
  });
  app.openapi(read, async (c) => {
    const { pool, cipher } = c.get('deps');
    return c.json(await getConnection(pool, cipher, callerTenant(c), c.req.valid('param').id), 200);
  });
  app.openapi(update, async (c) => {
    const { pool, cipher } = c.get('deps');
    return c.json(
      await updateConnection(pool, cipher, callerTenant(c), c.req.valid('param').id, c.req.valid('json')),
      200,
    );
  });
  app.openapi(remove, async (c) => {
    await deleteConnection(c.get('deps').pool, callerTenant(c), c.req.valid('param').id);
    return c.body(null, 204);
  });
  app.openapi(options, async (c) => {
    const { activityType, inputName } = c.req.valid('param');
    const type = findActivityType(activityType);
    if (!type) throw new NotFoundError(`Activity type ${activityType} is not registered`);
    const input = type.inputs.find((i) => i.name === inputName);
    if (!input?.connectionType)
      throw new NotFoundError(`Activity type ${activityType} has no connection input ${inputName}`);
    const names = await connectionNames(c.get('deps').pool, callerTenant(c), input.connectionType);
    return c.json({ items: names.map((n) => ({ text: n, value: n })), refresh: true }, 200);
  });
  return app;
}
