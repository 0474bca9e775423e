import type { HttpConnectionConfiguration } from './types.js';

export type HttpOutcome = { ok: true; status: number } | { ok: false; error: string };

/**
 * Sends one request through an HTTP connection: to `path` under its base URL (never another origin),
 * with its headers and bearer token, within its timeout. The response body is not kept.
 */
export async function sendThroughConnection(
  connection: HttpConnectionConfiguration,
  request: { method: string; path: string; body?: unknown },
): Promise<HttpOutcome> {
  const base = new URL(connection.baseUrl.endsWith('/') ? connection.baseUrl : `${connection.baseUrl}/`);
  let url: URL;
  try {
    url = new URL(request.path.replace(/^\/+/, ''), base);
  } catch {
    return { ok: false, error: `the path ${JSON.stringify(request.path)} is not a valid URL path` };
  }
  if (url.origin !== base.origin) return { ok: false, error: 'the path must stay under the connection base URL' };
  const headers = new Headers(connection.headers);
  if (connection.bearerToken) headers.set('authorization', `Bearer ${connection.bearerToken}`);
  const hasBody = request.body !== undefined && request.body !== null;
  if (hasBody && !headers.has('content-type')) headers.set('content-type', 'application/json');
  try {
    const res = await fetch(url, {
      method: request.method.toUpperCase(),
      headers,
      ...(hasBody ? { body: typeof request.body === 'string' ? request.body : JSON.stringify(request.body) } : {}),
      signal: AbortSignal.timeout(connection.timeoutMs),
      redirect: 'manual',
    });
    await res.body?.cancel();
    return { ok: true, status: res.status };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const why = e.name === 'TimeoutError' ? `no response within ${connection.timeoutMs} ms` : (e.cause?.code ?? e.message);
    return { ok: false, error: why };
  }
}
