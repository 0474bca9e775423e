import { createMiddleware } from 'hono/factory';
import { ADMIN_PRINCIPAL_ID, findApiKeyPrincipal, matchesAdminKey } from '../auth/api-keys.js';
import { grantsSatisfy, type PermissionSpec, requiredPermission } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { principalFromAccessToken } from '../auth/tokens.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import { addressKey, ADDRESS_RULE, countAttempt } from '../auth/throttle.js';
import { type AppDeps, type AppEnv, clientAddress } from './context.js';

/** Reads the credentials of a request: `ApiKey <key>` or `Bearer <access token>`. */
export async function authenticate(
  deps: AppDeps,
  header: string | undefined,
  address = 'in-process',
): Promise<Principal> {
  if (!header || header.trim() === '') {
    throw new UnauthorizedError(
      'No credentials: send "Authorization: ApiKey <key>" or "Authorization: Bearer <access token>"',
    );
  }
  const [scheme, ...rest] = header.trim().split(/\s+/);
  const credential = rest.join(' ');
  if (!credential) throw new UnauthorizedError(`The ${scheme} credential is empty`);
  switch (scheme?.toLowerCase()) {
    case 'apikey': {
      if (matchesAdminKey(credential, deps.adminApiKeyHash)) {
        return {
          kind: 'api-key',
          id: ADMIN_PRINCIPAL_ID,
          name: 'admin (ADMIN_API_KEY)',
          tenantId: null,
          permissions: ['*'],
        };
      }
      const principal = await findApiKeyPrincipal(deps.ungatedPool ?? deps.pool, credential);
      if (!principal) {
        // Guessing keys is throttled per client address (one atomic count per unknown key: 429 past the
        // limit); a valid key costs nothing extra.
        await countAttempt(deps.ungatedPool ?? deps.pool, addressKey(address), ADDRESS_RULE);
        throw new UnauthorizedError('Unknown or expired API key');
      }
      return principal;
    }
    case 'bearer':
      return principalFromAccessToken(deps.ungatedPool ?? deps.pool, deps.tokens, credential);
    default:
      throw new UnauthorizedError(`Unsupported authorization scheme "${scheme}"; use ApiKey or Bearer`);
  }
}

/**
 * The per-route guard: authenticates, then checks the route's declared permission under the configured
 * permission model. Runs before request validation, so an anonymous caller learns nothing about bodies.
 */
export function authorize(spec: PermissionSpec) {
  return createMiddleware<AppEnv>(async (c, next) => {
    if (spec === 'public') return next();
    const deps = c.get('deps');
    const principal = await authenticate(deps, c.req.header('authorization'), clientAddress(c));
    c.set('principal', principal);
    const required = requiredPermission(spec, deps.config.permissionModel);
    if (required && !grantsSatisfy(deps.config.permissionModel, principal.permissions, required)) {
      throw new ForbiddenError(`Missing permission: this operation requires "${required}"`);
    }
    await next();
  });
}
