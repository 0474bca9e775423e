import { OpenAPIHono, z } from '@hono/zod-openapi';
import { createApiKey } from '../../auth/api-keys.js';
import { grantsSatisfy } from '../../auth/permissions.js';
import { tenantKey } from '../../auth/principal.js';
import { ForbiddenError } from '../../errors.js';
import type { AppEnv } from '../context.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent } from '../schemas.js';
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
  return app;
}
