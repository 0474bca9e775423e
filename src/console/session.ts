import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { Identity } from '../auth/principal.js';
import { principalFromSessionToken } from '../auth/tokens.js';
import { ForbiddenError, TooManyAttemptsError, UnauthorizedError } from '../errors.js';
import { type AppEnv, fromTrustedProxy, viaHttps } from '../api/context.js';

/**
 * The console's session: one cookie holding the refresh token that `POST /identity/login`'s code issued
 * at sign-in (a normal session in `sessions`, as a bearer token's). Page script cannot read it (HttpOnly),
 * other sites cannot send it (SameSite=Strict), it goes only to the console (Path=/console), and only over
 * HTTPS when the console is served so. Every request checks it against Postgres
 * (`principalFromSessionToken`): a sign-out or a deleted user ends it at once.
 */
export const SESSION_COOKIE = 'wfa_console';
export const CONSOLE_PATH = '/console';

/** Paths the session cookie is read on: the console's pages, forms and streams; not its static assets. */
export const isConsolePath = (path: string) =>
  (path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`)) && !path.startsWith(`${CONSOLE_PATH}/assets/`);

/**
 * What the console's credentials come to (src/api/authorize.ts `identify` asks this for console paths): the
 * session cookie, and only it; an Authorization header is not the console's (a proxy's Basic credentials,
 * say) and is ignored there. The principal is found before routing, so that the app's per-tenant shares
 * count a console request as its tenant's, as they count a bearer token's.
 */
export async function consoleIdentity(c: Context<AppEnv>): Promise<Identity> {
  const token = getCookie(c, SESSION_COOKIE);
  if (!token) return { none: true };
  const deps = c.get('deps');
  try {
    return { principal: await principalFromSessionToken(deps.ungatedPool ?? deps.pool, deps.tokens, token) };
  } catch (err) {
    if (err instanceof UnauthorizedError || err instanceof TooManyAttemptsError) return { refused: err };
    throw err;
  }
}

/** Sets the session cookie after a sign-in. No Max-Age: it ends with the browser session, or sooner. */
export function setSessionCookie(c: Context<AppEnv>, refreshToken: string): void {
  setCookie(c, SESSION_COOKIE, refreshToken, {
    path: CONSOLE_PATH,
    httpOnly: true,
    sameSite: 'Strict',
    secure: viaHttps(c),
  });
}

export function clearSessionCookie(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { path: CONSOLE_PATH, httpOnly: true, sameSite: 'Strict', secure: viaHttps(c) });
}

/**
 * The console's own origin as the browser sees it: https when served over TLS or behind a trusted proxy
 * that says so, and the host the request named (a trusted proxy's X-Forwarded-Host, else Host).
 */
export function ownOrigin(c: Context<AppEnv>): string | undefined {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  const peer = env?.incoming?.socket?.remoteAddress;
  const forwarded = peer && fromTrustedProxy(c, peer) ? c.req.header('x-forwarded-host') : undefined;
  const host = (forwarded ?? '').split(',').pop()?.trim() || c.req.header('host');
  if (!host) return undefined;
  return `${viaHttps(c) ? 'https' : 'http'}://${host}`.toLowerCase();
}

/**
 * State-changing requests are accepted only from the console's own pages: the request's Origin must be the
 * console's origin, or, where a browser sends no Origin, Sec-Fetch-Site must say same-origin. Anything else
 * (another site's form, a sandboxed frame's `Origin: null`, a request naming neither) is a 403. SameSite=Strict
 * already keeps the cookie off cross-site requests; this also refuses same-site ones from other origins
 * (another port or subdomain) and a request that carries no cookie at all (a sign-in forced on someone).
 */
export function checkSameOrigin(c: Context<AppEnv>): void {
  const origin = c.req.header('origin');
  if (origin !== undefined) {
    if (origin.toLowerCase() === ownOrigin(c)) return;
    throw new ForbiddenError(`Cross-origin request refused: the console accepts forms only from its own pages`);
  }
  if (c.req.header('sec-fetch-site') === 'same-origin') return;
  throw new ForbiddenError(
    'Request refused: a form of the console must come from its own pages (the request had no Origin header)',
  );
}
