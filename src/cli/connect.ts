import { type Client, type ClientOptions, createClient } from '../client/index.js';
import { type CliEnvironment, type Credentials, saveCredentials } from './credentials.js';
import { CliFailure } from './failure.js';
import { type Target, targetProblem } from './target.js';

/** What the CLI accepts of a server: a time limit per request, a size limit per answer, an idle limit per stream. */
export type Bounds = Pick<ClientOptions, 'timeoutMs' | 'maxResponseBytes' | 'streamIdleTimeoutMs'>;

/** The target, or a usage failure (exit 2) that says what is wrong with its URL. */
export function usable(t: Target): Target {
  const problem = targetProblem(t);
  if (problem) throw new CliFailure(problem, 2, 'bad-url');
  return t;
}

/**
 * A client with WFA_API_KEY, else the stored key or token (refreshed when it expired). Stored credentials go
 * only to the server they were stored for: a --url or WFA_URL naming another (a typo, a variable left from
 * another project) gets none, and the CLI says so, rather than hand it the key or a token.
 */
export async function connect(
  env: CliEnvironment,
  stored: Credentials | undefined,
  baseUrl: string,
  bounds: Bounds,
): Promise<Client> {
  if (env.apiKey) return createClient({ ...bounds, baseUrl, apiKey: env.apiKey });
  if (stored && !sameServer(stored.url, baseUrl)) {
    throw new CliFailure(
      `Not signed in to ${baseUrl}: the stored sign-in is for ${stored.url}. Run \`wfa login --url ${baseUrl}\` (or set WFA_API_KEY)`,
      2,
      'not-signed-in',
    );
  }
  if (stored?.apiKey) return createClient({ ...bounds, baseUrl, apiKey: stored.apiKey });
  if (stored?.accessToken) {
    if ((stored.accessTokenExpiresAt ?? 0) - 30_000 > Date.now() || !stored.refreshToken)
      return createClient({ ...bounds, baseUrl, accessToken: stored.accessToken });
    const tokens = await createClient({ ...bounds, baseUrl }).identity.refresh(stored.refreshToken);
    await saveCredentials(env.configDir, {
      url: stored.url,
      accessToken: tokens.accessToken,
      refreshToken: tokens.refreshToken,
      accessTokenExpiresAt: Date.now() + tokens.expiresIn * 1000,
    });
    return createClient({ ...bounds, baseUrl, accessToken: tokens.accessToken });
  }
  throw new CliFailure('Not signed in: run `wfa login` (or set WFA_API_KEY)', 2, 'not-signed-in');
}

/** The same server: the same origin and path (a trailing slash aside). */
function sameServer(a: string, b: string): boolean {
  const at = (u: string) => {
    const url = new URL(u);
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
  };
  try {
    return at(a) === at(b);
  } catch {
    return false;
  }
}
