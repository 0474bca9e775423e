import { OpenAPIHono, z } from '@hono/zod-openapi';
import { createApiKey, listApiKeys, revokeApiKey } from '../../auth/api-keys.js';
import {
  administeredTenant,
  checkGrantsKnown,
  checkHoldsAll,
  namedTenant,
  placementTenant,
  roleGrants,
} from '../../auth/delegation.js';
import {
  LEGACY_EQUIVALENTS,
  LEGACY_PERMISSIONS,
  type PermissionSpec,
  STRUCTURED_PERMISSIONS,
} from '../../auth/permissions.js';
import type { Principal } from '../../auth/principal.js';
import { login, logout, refresh } from '../../auth/tokens.js';
import { KEYS_VIEW, USERS_VIEW } from '../../auth/route-permissions.js';
import { createRole, createUser, deleteUser, hashSecret, listUsers, userGrants } from '../../auth/users.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import { type AppEnv, callerTenant, clientAddress } from '../context.js';
import { Timestamp } from '../../vocabulary/input.js';
import { BODY_ROUTE_PROBLEMS, counted, jsonBody, jsonContent, problems } from '../schemas.js';
import { byIdRoute } from '../route-shapes.js';
import { secureRoute } from '../secure-route.js';

const TAGS = ['Identity'];

const PermissionList = z.array(z.string().trim().min(1).max(200)).max(200);

/**
 * A tenant a key or user is placed in. Not `default`: that is how the default tenant (null in the API) reads
 * in the Temporal UI (`AlterationTenant`) and in wfa's tables, so a tenant of that name would look like it.
 */
const PlacedTenant = z
  .string()
  .max(200)
  .refine((t) => t.trim().toLowerCase() !== 'default', {
    message: '"default" names the default tenant where it is shown; use null (or leave it out) for it, or another name',
  });

const CreateApiKeySchema = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    permissions: PermissionList,
    tenantId: PlacedTenant.nullable().optional().openapi({
      description:
        'Place the key in a tenant (default: the caller\'s; another tenant is for the operator only: a default-tenant principal with "*")',
    }),
    expiresAt: Timestamp.nullable()
      .optional()
      .openapi({ description: 'When the key stops working (in the future); absent or null: never' }),
  })
  .openapi('CreateApiKeyRequest');

const createKey = secureRoute(
  // The identity administration routes need `*` in the legacy model.
  { structured: 'identity/api-keys:create', legacy: '*' },
  {
    method: 'post',
    path: '/identity/api-keys',
    tags: TAGS,
    summary: 'Create an API key; the key is shown once and only its hash is stored',
    request: jsonBody(CreateApiKeySchema),
    responses: {
      201: jsonContent(
        z.object({
          id: z.string(),
          name: z.string(),
          key: z.string(),
          permissions: z.array(z.string()),
          tenantId: z.string().nullable(),
          expiresAt: z.string().nullable(),
        }),
        'The new key (shown only in this response)',
      ),
      ...BODY_ROUTE_PROBLEMS,
    },
  },
);

/** Who created a key or user (four eyes follow it: section 10). */
const CreatorSchema = z
  .object({
    kind: z.enum(['user', 'apiKey']),
    id: z.string(),
    name: z.string().nullable().openapi({ description: 'null when that key or user no longer exists' }),
  })
  .nullable()
  .openapi('Creator', {
    description:
      'The key or user that created it; null for the bootstrap principals and those made before creators were recorded',
  });

const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    permissions: z.array(z.string()),
    tenantId: z.string().nullable(),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable(),
    expiresAt: z.string().nullable(),
    createdBy: CreatorSchema,
  })
  .openapi('ApiKey');

const UserSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    roles: z.array(z.string()),
    permissions: z.array(z.string()),
    tenantId: z.string().nullable(),
    createdAt: z.string(),
    createdBy: CreatorSchema,
  })
  .openapi('User');

/**
 * Users and keys are listed alike: the caller's tenant's, or for the operator those of the tenant it names
 * (a delegated administrator naming another tenant is refused, 403).
 */
const tenantListRoute = <const P extends string, T extends z.ZodType>(
  permission: PermissionSpec,
  path: P,
  noun: 'users' | 'keys',
  summary: string,
  item: T,
) =>
  secureRoute(permission, {
    method: 'get',
    path,
    tags: TAGS,
    summary,
    request: {
      query: z.strictObject({
        tenantId: z
          .string()
          .max(200)
          .optional()
          .openapi({
            description: `List this tenant's ${noun} (empty: the default tenant). Another tenant than the caller's is for the operator only (403)`,
          }),
      }),
    },
    responses: { 200: jsonContent(counted(item), `The ${noun}`), ...problems(400, 401, 403) },
  });

const listUsersRoute = tenantListRoute(
  USERS_VIEW,
  '/identity/users',
  'users',
  "The caller's tenant's users and who created each (never a password); the operator may name another tenant",
  UserSchema,
);

const listKeys = tenantListRoute(
  KEYS_VIEW,
  '/identity/api-keys',
  'keys',
  "The caller's tenant's API keys (never the key itself); the operator may name another tenant",
  ApiKeySchema,
);

const revokeKey = byIdRoute(
  { structured: 'identity/api-keys:delete', legacy: '*' },
  'delete',
  '/identity/api-keys/{id}',
  {
    tags: TAGS,
    summary: 'Revoke an API key: it stops working at once, on every node (the operator reaches every tenant)',
    id: z.string().max(200),
    answer: { 204: { description: 'Revoked' } },
  },
);

const permissionsRoute = secureRoute(
  { structured: 'signed-in', legacy: 'signed-in' },
  {
    method: 'get',
    path: '/identity/permissions',
    tags: TAGS,
    summary: 'The permissions of both models that a user, role or API key may be granted',
    responses: {
      200: jsonContent(
        z.object({
          structured: z.array(z.string()),
          legacy: z.array(z.string()),
          wildcards: z.array(z.string()),
          legacyEquivalents: z.record(z.string(), z.string()).openapi({
            description:
              'For each structured permission, what the legacy model asks for the same operations ("*" where it has no string of its own)',
          }),
        }),
        'Grantable permissions; wildcards are `*`, `*:{verb}` and `{resource}:*` of the structured names',
      ),
      ...problems(401),
    },
  },
);

const TokenPairSchema = z
  .object({
    accessToken: z.string(),
    refreshToken: z.string(),
    tokenType: z.literal('Bearer'),
    expiresIn: z.number().int(),
  })
  .openapi('TokenPair');
const TenantField = PlacedTenant.nullable().optional();

const loginRoute = secureRoute('public', {
  method: 'post',
  path: '/identity/login',
  tags: TAGS,
  summary: 'Sign in with a user name and password: a new session and its tokens',
  request: jsonBody(
    z
      .strictObject({ username: z.string().min(1).max(200), password: z.string().min(1).max(1000) })
      .openapi('LoginRequest'),
  ),
  responses: { 200: jsonContent(TokenPairSchema, 'Signed in'), ...problems(400, 401, 413, 415, 429) },
});

const refreshRoute = secureRoute('public', {
  method: 'post',
  path: '/identity/refresh',
  tags: TAGS,
  summary: 'Rotate a refresh token: a new pair with current grants; the old token stops working',
  request: jsonBody(z.strictObject({ refreshToken: z.string().max(5000).optional() }).openapi('RefreshRequest')),
  responses: { 200: jsonContent(TokenPairSchema, 'Refreshed'), ...problems(400, 401, 413, 415) },
});

const logoutRoute = secureRoute(
  { structured: 'signed-in', legacy: 'signed-in' },
  {
    method: 'post',
    path: '/identity/logout',
    tags: TAGS,
    summary: "Sign out: the caller's session is revoked (its refresh tokens stop working at once)",
    request: {
      body: {
        required: false,
        content: { 'application/json': { schema: z.strictObject({ refreshToken: z.string().max(5000).optional() }) } },
      },
    },
    responses: { 204: { description: 'Signed out' }, ...problems(400, 401) },
  },
);

const createUserRoute = secureRoute(
  { structured: 'identity/users:create', legacy: '*' },
  {
    method: 'post',
    path: '/identity/users',
    tags: TAGS,
    summary: 'Create a user (password stored as an Argon2id hash)',
    request: jsonBody(
      z
        .strictObject({
          name: z.string().trim().min(1).max(200),
          password: z.string().min(8, 'At least 8 characters').max(1000),
          roles: z.array(z.string().trim().min(1).max(200)).max(100).optional(),
          permissions: PermissionList.optional(),
          tenantId: TenantField,
        })
        .openapi('CreateUserRequest'),
    ),
    responses: {
      201: jsonContent(
        z.object({
          id: z.string(),
          name: z.string(),
          roles: z.array(z.string()),
          permissions: z.array(z.string()),
          tenantId: z.string().nullable(),
        }),
        'Created',
      ),
      ...BODY_ROUTE_PROBLEMS,
      ...problems(409),
    },
  },
);

const createRoleRoute = secureRoute(
  { structured: 'identity/roles:create', legacy: '*' },
  {
    method: 'post',
    path: '/identity/roles',
    tags: TAGS,
    summary: "Create a role in the caller's tenant",
    request: jsonBody(
      z
        .strictObject({ name: z.string().trim().min(1).max(200), permissions: PermissionList })
        .openapi('CreateRoleRequest'),
    ),
    responses: {
      201: jsonContent(z.object({ id: z.string(), name: z.string(), permissions: z.array(z.string()) }), 'Created'),
      ...BODY_ROUTE_PROBLEMS,
      ...problems(409),
    },
  },
);

const deleteUserRoute = byIdRoute(
  { structured: 'identity/users:delete', legacy: '*' },
  'delete',
  '/identity/users/{id}',
  {
    tags: TAGS,
    summary: 'Delete a user; its sessions end with it (the operator reaches every tenant)',
    answer: { 204: { description: 'Deleted' } },
  },
);

const hashRoute = secureRoute(
  { structured: 'identity/users:create', legacy: '*' },
  {
    method: 'post',
    path: '/identity/secrets/hash',
    tags: TAGS,
    summary: 'Hash a secret the way passwords are stored (Argon2id)',
    request: jsonBody(z.strictObject({ secret: z.string().min(1).max(1000) }).openapi('HashSecretRequest')),
    responses: { 200: jsonContent(z.object({ hash: z.string() }), 'The hash'), ...BODY_ROUTE_PROBLEMS },
  },
);

/** How a new key or user records the principal that made it (four eyes follow it). */
const creatorOf = (caller: Principal) => ({
  kind: caller.kind === 'user' ? ('user' as const) : ('apiKey' as const),
  id: caller.id,
});

export function identityRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(createKey, async (c) => {
    const { pool, config } = c.get('deps');
    const body = c.req.valid('json');
    const caller = c.get('principal');
    checkGrantsKnown(body.permissions);
    const tenant = placementTenant(caller, body.tenantId);
    checkHoldsAll(caller, body.permissions, config.permissionModel);
    const expiresAt = body.expiresAt ? new Date(body.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= Date.now()) {
      throw new ValidationError('expiresAt must be in the future', [
        { path: '/expiresAt', message: 'Must be in the future' },
      ]);
    }
    const created = await createApiKey(pool, {
      name: body.name,
      permissions: body.permissions,
      tenantKey: tenant,
      expiresAt,
      createdBy: creatorOf(caller),
    });
    c.get('logger').info({ apiKeyId: created.id, tenant }, 'api key created');
    c.header('cache-control', 'no-store');
    return c.json(created, 201);
  });
  app.openapi(listUsersRoute, async (c) => {
    const tenant = namedTenant(c.get('principal'), c.req.valid('query').tenantId, 'listing the users of');
    return c.json(await listUsers(c.get('deps').pool, tenant), 200);
  });
  app.openapi(listKeys, async (c) => {
    const tenant = namedTenant(c.get('principal'), c.req.valid('query').tenantId, 'listing the keys of');
    return c.json(await listApiKeys(c.get('deps').pool, tenant), 200);
  });
  app.openapi(revokeKey, async (c) => {
    const id = c.req.valid('param').id;
    if (!(await revokeApiKey(c.get('deps').pool, administeredTenant(c.get('principal')), id)))
      throw new NotFoundError(`API key ${id} not found`);
    c.get('logger').info({ apiKeyId: id }, 'api key revoked');
    return c.body(null, 204);
  });
  app.openapi(permissionsRoute, (c) =>
    c.json(
      {
        structured: [...STRUCTURED_PERMISSIONS],
        legacy: [...LEGACY_PERMISSIONS],
        wildcards: ['*', '*:{verb}', '{resource}:*'],
        legacyEquivalents: LEGACY_EQUIVALENTS,
      },
      200,
    ),
  );

  app.openapi(loginRoute, async (c) => {
    const { pool, tokens } = c.get('deps');
    const { username, password } = c.req.valid('json');
    const pair = await login(pool, tokens, username, password, clientAddress(c));
    c.header('cache-control', 'no-store');
    return c.json(pair, 200);
  });
  app.openapi(refreshRoute, async (c) => {
    const { pool, tokens } = c.get('deps');
    const pair = await refresh(pool, tokens, c.req.valid('json').refreshToken ?? '');
    c.header('cache-control', 'no-store');
    return c.json(pair, 200);
  });
  app.openapi(logoutRoute, async (c) => {
    const { pool, tokens } = c.get('deps');
    const body = c.req.valid('json') as { refreshToken?: string } | undefined;
    await logout(pool, tokens, c.get('principal'), body?.refreshToken);
    return c.body(null, 204);
  });
  app.openapi(createUserRoute, async (c) => {
    const { pool, config } = c.get('deps');
    const body = c.req.valid('json');
    const caller = c.get('principal');
    checkGrantsKnown(body.permissions ?? []);
    const tenant = placementTenant(caller, body.tenantId);
    // Roles hand out their grants too: the caller must hold them.
    checkHoldsAll(
      caller,
      [...(body.permissions ?? []), ...(await roleGrants(pool, tenant, body.roles ?? []))],
      config.permissionModel,
    );
    const user = await createUser(pool, tenant, { ...body, createdBy: creatorOf(caller) });
    c.get('logger').info({ userId: user.id, tenant }, 'user created');
    return c.json(user, 201);
  });
  app.openapi(createRoleRoute, async (c) => {
    const { pool, config } = c.get('deps');
    const body = c.req.valid('json');
    const caller = c.get('principal');
    checkGrantsKnown(body.permissions);
    checkHoldsAll(caller, body.permissions, config.permissionModel);
    return c.json(await createRole(pool, callerTenant(c), body), 201);
  });
  app.openapi(deleteUserRoute, async (c) => {
    const { pool, config } = c.get('deps');
    const id = c.req.valid('param').id;
    // Deleting a user is delegation too: only a caller holding every grant of that user may remove it
    // (else `identity/users:delete` alone could delete the admin).
    const scope = administeredTenant(c.get('principal'));
    const grants = await userGrants(pool, scope, id);
    if (!grants) throw new NotFoundError(`User ${id} not found`);
    checkHoldsAll(c.get('principal'), grants, config.permissionModel, 'delete a user holding');
    await deleteUser(pool, scope, id);
    c.get('logger').info({ userId: id }, 'user deleted; its sessions ended');
    return c.body(null, 204);
  });
  app.openapi(hashRoute, async (c) => c.json({ hash: await hashSecret(c.req.valid('json').secret) }, 200));
  return app;
}
