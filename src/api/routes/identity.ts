import { OpenAPIHono, z } from '@hono/zod-openapi';
import { createApiKey } from '../../auth/api-keys.js';
import { login, logout, refresh } from '../../auth/tokens.js';
import { createRole, createUser, deleteUser, hashSecret } from '../../auth/users.js';
import { grantsSatisfy } from '../../auth/permissions.js';
import { tenantKey } from '../../auth/principal.js';
import { ForbiddenError } from '../../errors.js';
import { type AppEnv, callerTenant } from '../context.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

const PermissionList = z.array(z.string().trim().min(1).max(200)).max(200);

const CreateApiKeySchema = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    permissions: PermissionList,
    tenantId: z.string().max(200).nullable().optional().openapi({ description: 'Place the key in a tenant (default: the caller\'s)' }),
  })
  .openapi('CreateApiKeyRequest');

const createKey = secureRoute(
  // The identity administration routes need `*` in the legacy model.
  { structured: 'identity/api-keys:create', legacy: '*' },
  {
    method: 'post',
    path: '/identity/api-keys',
    tags: ['Identity'],
    summary: 'Create an API key; the key is shown once and only its hash is stored',
    request: jsonBody(CreateApiKeySchema),
    responses: {
      201: jsonContent(
        z.object({ id: z.string(), name: z.string(), key: z.string(), permissions: z.array(z.string()), tenantId: z.string().nullable() }),
        'The new key (shown only in this response)',
      ),
      ...BODY_ROUTE_PROBLEMS,
    },
  },
);

const TAGS = ['Identity'];
const TokenPairSchema = z
  .object({ accessToken: z.string(), refreshToken: z.string(), tokenType: z.literal('Bearer'), expiresIn: z.number().int() })
  .openapi('TokenPair');
const TenantField = z.string().max(200).nullable().optional();

const loginRoute = secureRoute('public', {
  method: 'post',
  path: '/identity/login',
  tags: TAGS,
  summary: 'Sign in with a user name and password: a new session and its tokens',
  request: jsonBody(z.strictObject({ username: z.string().min(1).max(200), password: z.string().min(1).max(1000) }).openapi('LoginRequest')),
  responses: { 200: jsonContent(TokenPairSchema, 'Signed in'), ...problems(400, 401, 413, 415) },
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
    request: { body: { required: false, content: { 'application/json': { schema: z.strictObject({ refreshToken: z.string().max(5000).optional() }) } } } },
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
        z.object({ id: z.string(), name: z.string(), roles: z.array(z.string()), permissions: z.array(z.string()), tenantId: z.string().nullable() }),
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
    request: jsonBody(z.strictObject({ name: z.string().trim().min(1).max(200), permissions: PermissionList }).openapi('CreateRoleRequest')),
    responses: {
      201: jsonContent(z.object({ id: z.string(), name: z.string(), permissions: z.array(z.string()) }), 'Created'),
      ...BODY_ROUTE_PROBLEMS,
      ...problems(409),
    },
  },
);

const deleteUserRoute = secureRoute(
  { structured: 'identity/users:delete', legacy: '*' },
  {
    method: 'delete',
    path: '/identity/users/{id}',
    tags: TAGS,
    summary: 'Delete a user; its sessions end with it',
    request: { params: z.object({ id: z.string() }) },
    responses: { 204: { description: 'Deleted' }, ...problems(401, 403, 404) },
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

/**
 * Rules for placing a new principal: a caller outside the default tenant may only create principals in
 * its own tenant, and nobody can hand out a grant they do not hold themselves.
 */
export function checkDelegation(
  caller: { tenantId: string | null; permissions: string[] },
  requestedTenant: string | null | undefined,
  permissions: string[],
  model: 'structured' | 'legacy',
): string {
  const target = requestedTenant === undefined ? caller.tenantId : requestedTenant === '' ? null : requestedTenant;
  if (caller.tenantId !== null && target !== caller.tenantId) {
    throw new ForbiddenError('Only a principal of the default tenant can place a principal in another tenant');
  }
  for (const p of permissions) {
    if (!grantsSatisfy(model, caller.permissions, p) && !caller.permissions.includes('*')) {
      throw new ForbiddenError(`You cannot grant "${p}": you do not hold it yourself`);
    }
  }
  return tenantKey(target);
}

export function identityRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(createKey, async (c) => {
    const { pool, config } = c.get('deps');
    const body = c.req.valid('json');
    const tenant = checkDelegation(c.get('principal'), body.tenantId, body.permissions, config.permissionModel);
    const created = await createApiKey(pool, { name: body.name, permissions: body.permissions, tenantKey: tenant });
    c.get('logger').info({ apiKeyId: created.id, tenant }, 'api key created');
    return c.json(created, 201);
  });

  app.openapi(loginRoute, async (c) => {
    const { pool, tokens } = c.get('deps');
    const { username, password } = c.req.valid('json');
    const pair = await login(pool, tokens, username, password);
    return c.json(pair, 200);
  });
  app.openapi(refreshRoute, async (c) => {
    const { pool, tokens } = c.get('deps');
    const pair = await refresh(pool, tokens, c.req.valid('json').refreshToken ?? '');
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
    const tenant = checkDelegation(caller, body.tenantId, body.permissions ?? [], config.permissionModel);
    // Roles hand out their grants too: the caller must hold them.
    const { rows } = await pool.query<{ p: string }>(
      'SELECT DISTINCT unnest(permissions) AS p FROM roles WHERE tenant_id = $1 AND name = ANY($2::text[])',
      [tenant, body.roles ?? []],
    );
    checkDelegation(caller, body.tenantId, rows.map((r) => r.p), config.permissionModel);
    const user = await createUser(pool, tenant, body);
    c.get('logger').info({ userId: user.id, tenant }, 'user created');
    return c.json(user, 201);
  });
  app.openapi(createRoleRoute, async (c) => {
    const { pool, config } = c.get('deps');
    const body = c.req.valid('json');
    const tenant = checkDelegation(c.get('principal'), undefined, body.permissions, config.permissionModel);
    return c.json(await createRole(pool, tenant, body), 201);
  });
  app.openapi(deleteUserRoute, async (c) => {
    const { pool } = c.get('deps');
    const id = c.req.valid('param').id;
    await deleteUser(pool, callerTenant(c), id);
    c.get('logger').info({ userId: id }, 'user deleted; its sessions ended');
    return c.body(null, 204);
  });
  app.openapi(hashRoute, async (c) => c.json({ hash: await hashSecret(c.req.valid('json').secret) }, 200));
  return app;
}
