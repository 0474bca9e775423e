import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import { ADMIN_PRINCIPAL_ID, findApiKeyPrincipal, matchesAdminKey } from '../auth/api-keys.js';
import { grantsSatisfy, type PermissionModel, type PermissionSpec, requiredPermission } from '../auth/permissions.js';
import type { Identity, Principal } from '../auth/principal.js';
import { INSTANCES_VIEW } from '../auth/route-permissions.js';
import { principalFromAccessToken } from '../auth/tokens.js';
import { ForbiddenError, TooManyAttemptsError, UnauthorizedError } from '../errors.js';
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
        // limit); a valid key costs nothing extra. An address this node already saw blocked is answered
        // from memory until its block ends: a flood of unknown keys costs no write per request.
        const key = addressKey(address);
        const blocked = deps.blockedAddresses?.get(key);
        if (blocked && blocked > Date.now()) {
          throw new TooManyAttemptsError(
            `Too many failed attempts; try again in ${Math.ceil((blocked - Date.now()) / 1000)} seconds`,
            Math.ceil((blocked - Date.now()) / 1000),
          );
        }
        try {
          await countAttempt(deps.ungatedPool ?? deps.pool, key, ADDRESS_RULE);
        } catch (err) {
          if (err instanceof TooManyAttemptsError && deps.blockedAddresses) {
            if (deps.blockedAddresses.size > 10_000) deps.blockedAddresses.clear();
            deps.blockedAddresses.set(key, Date.now() + err.retryAfterSeconds * 1000);
          }
          throw err;
        }
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
 * Authenticates a request once, before routing, without throwing: the app's time share (src/api/app.ts)
 * needs to know whose request it is before the route runs, and `authorize` then reads the same result.
 * A request without credentials has none; one whose credentials fail keeps the failure for a route that
 * needs a principal (a public route ignores it, as before).
 */
export async function identify(c: Context<AppEnv>): Promise<Identity> {
  // A surface beside the API authenticates its own paths, and only it (the console: by its session cookie).
  const surface = c.get('deps').surfaces?.find((s) => s.owns(c.req.path));
  if (surface) return surface.identify(c);
  const header = c.req.header('authorization');
  if (!header || header.trim() === '') return { none: true };
  try {
    return { principal: await authenticate(c.get('deps'), header, clientAddress(c)) };
  } catch (err) {
    if (err instanceof UnauthorizedError || err instanceof TooManyAttemptsError) return { refused: err };
    throw err;
  }
}

/**
 * The per-route guard: authenticates (or reads what `identify` found), then checks the route's declared
 * permission under the configured permission model. Runs before request validation, so an anonymous
 * caller learns nothing about bodies.
 */
export function authorize(spec: PermissionSpec) {
  return createMiddleware<AppEnv>(async (c, next) => {
    if (spec === 'public') return next();
    const deps = c.get('deps');
    const known = c.get('identity');
    let principal: Principal;
    if (known && 'principal' in known) principal = known.principal;
    else if (known && 'refused' in known) throw known.refused;
    else principal = await authenticate(deps, c.req.header('authorization'), clientAddress(c));
    c.set('principal', principal);
    checkPermission(deps.config.permissionModel, principal, spec);
    await next();
  });
}

/**
 * Whether the principal may do what `spec` requires under the model: the one check behind every route
 * (`authorize`) and every console action, which shows or runs an action only where this passes.
 */
export function mayDo(
  model: PermissionModel,
  principal: Pick<Principal, 'permissions'>,
  spec: PermissionSpec,
): boolean {
  return missingPermission(model, principal, spec) === undefined;
}

/** Throws the 403 of a missing permission, naming it (contract section 1). */
export function checkPermission(
  model: PermissionModel,
  principal: Pick<Principal, 'permissions'>,
  spec: PermissionSpec,
): void {
  const missing = missingPermission(model, principal, spec);
  if (missing) throw new ForbiddenError(missingPermissionDetail(missing));
}

/** The detail of the 403 for a missing permission: the API's and the console's words. */
export const missingPermissionDetail = (required: string) =>
  `Missing permission: this operation requires "${required}"`;

function missingPermission(
  model: PermissionModel,
  principal: Pick<Principal, 'permissions'>,
  spec: PermissionSpec,
): string | undefined {
  const required = requiredPermission(spec, model);
  return required && !grantsSatisfy(model, principal.permissions, required) ? required : undefined;
}

/**
 * May the caller read instances (`workflows/instances:view`)? Where another permission shows instance values
 * (a preview's before and after), they are shown only if so (src/alterations/preview.ts `previewShown`).
 */
export function mayReadInstances(c: Context<AppEnv>): boolean {
  return mayDo(c.get('deps').config.permissionModel, c.get('principal'), INSTANCES_VIEW);
}
