import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { isTransientError, SQLSTATE, sqlState } from '../db/errors.js';
import { ConnectionShareTimeout } from '../db/pool.js';
import { DomainError, type FieldError, NodeBusyError, TenantShareError, TooManyAttemptsError } from '../errors.js';
import { AbandonedError } from '../vocabulary/time-slice.js';
import type { AppEnv } from './context.js';

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** Problem types are relative URIs naming the kind of problem; `about:blank` for the generic ones. */
const TYPES: Record<number, string> = {
  400: '/problems/bad-request',
  401: '/problems/unauthorized',
  403: '/problems/forbidden',
  404: '/problems/not-found',
  405: '/problems/method-not-allowed',
  408: '/problems/request-timeout',
  409: '/problems/conflict',
  413: '/problems/payload-too-large',
  415: '/problems/unsupported-media-type',
  429: '/problems/too-many-attempts',
  431: '/problems/headers-too-large',
  500: '/problems/internal',
  503: '/problems/unavailable',
};

/** A tenant over its share of a shared resource (429): not a guessing block. */
const SHARE_TYPE = '/problems/tenant-share-exhausted';

/**
 * The problem document alone, for answers written outside Hono (the server's client errors); it ends
 * with a newline like every JSON body the app writes.
 */
export function problemBody(status: number, detail: string): string {
  return `${JSON.stringify({ type: TYPES[status] ?? 'about:blank', title: TITLES[status] ?? 'Error', status, detail })}\n`;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: FieldError[];
  traceId?: string;
}

/** Writes an RFC 9457 problem response. */
export function problem(
  c: Context<AppEnv>,
  status: ContentfulStatusCode,
  detail: string,
  errors?: FieldError[],
  headers?: Record<string, string>,
  type?: string,
): Response {
  const body: Problem = {
    type: type ?? TYPES[status] ?? 'about:blank',
    title: TITLES[status] ?? 'Error',
    status,
    detail,
  };
  if (errors && errors.length) body.errors = errors;
  // The id the server's log lines of this request carry: the OpenTelemetry trace id with tracing on, else
  // the request id.
  const traceId = c.get('traceId') ?? c.get('requestId');
  if (traceId) body.traceId = traceId;
  return c.body(`${JSON.stringify(body)}\n`, status, { 'content-type': 'application/problem+json', ...headers });
}

export { zodFieldErrors } from '../errors.js';

/** The one `onError`: domain errors and HTTP exceptions to their status, anything else a generic 500. */
export function handleError(err: Error, c: Context<AppEnv>): Response {
  if (err instanceof DomainError) {
    const headers: Record<string, string> = err.status === 401 ? { 'www-authenticate': WWW_AUTHENTICATE } : {};
    if (err instanceof TooManyAttemptsError || err instanceof TenantShareError || err instanceof NodeBusyError)
      headers['retry-after'] = String(err.retryAfterSeconds);
    return problem(
      c,
      err.status,
      err.message,
      err.errors,
      headers,
      err instanceof TenantShareError ? SHARE_TYPE : undefined,
    );
  }
  if (err instanceof HTTPException) {
    const status = err.status as ContentfulStatusCode;
    return problem(c, status, err.message || TITLES[status] || 'Error');
  }
  // The client went away and the work it asked for stopped at a yield point: nobody reads this answer.
  if (err instanceof AbandonedError) {
    c.get('logger')?.info('the client went away; its request was stopped');
    return problem(c, 503, 'The client closed the connection; the request was abandoned');
  }
  // The tenant's requests hold their whole share of the API's connections (TENANT_API_CONNECTIONS).
  if (err instanceof ConnectionShareTimeout) {
    c.get('logger')?.warn("a request waited past the acquire timeout for its tenant's share of connections");
    return problem(c, 503, err.message, undefined, { 'retry-after': '1' });
  }
  // The database could not answer in time (API_STATEMENT_TIMEOUT_MS, no free connection, unreachable):
  // a 503 the client may retry, not a 500 blaming the request.
  if (sqlState(err) === SQLSTATE.queryCanceled) {
    c.get('logger')?.warn({ err }, 'statement cancelled: over API_STATEMENT_TIMEOUT_MS or the client went away');
    return problem(
      c,
      503,
      'The database did not answer within the time limit of an API request; try again later or narrow the request',
    );
  }
  if (isTransientError(err)) {
    c.get('logger')?.warn({ err }, 'database unavailable for a request');
    return problem(c, 503, 'The database is busy or unavailable; try again later');
  }
  c.get('logger')?.error({ err }, 'unhandled error');
  return problem(c, 500, 'An unexpected error occurred. Quote the traceId when reporting it.');
}

export const WWW_AUTHENTICATE = 'Bearer realm="workflow-alterations", ApiKey realm="workflow-alterations"';
