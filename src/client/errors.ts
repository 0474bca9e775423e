/**
 * What can go wrong between the client and the service, as errors a caller can tell apart: the service's
 * own problem+json answer (ProblemError), no answer at all (ConnectionError), or an answer that is not
 * this service's API (UnexpectedAnswerError: another server, a proxy's error page, garbage).
 */

/** The request as the errors name it. */
export interface RequestInfo {
  baseUrl: string;
  method: string;
  path: string;
}

/** A problem+json answer of the service (RFC 9457): `detail` says what is wrong, `errors` names each field. */
export class ProblemError extends Error {
  override name = 'ProblemError';
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly errors: { path: string; message: string }[] = [],
    /** The problem document as the service sent it (type, traceId and any other member). */
    readonly problem: Record<string, unknown> = { title, status, detail },
  ) {
    super(detail || title);
  }
}

export type ConnectionFailure =
  | 'bad-url'
  | 'host-not-found'
  | 'connection-refused'
  | 'tls'
  | 'certificate'
  | 'not-http'
  | 'connection-closed'
  | 'timeout'
  | 'unreachable';

/** No answer: the host is unknown, nothing listens, TLS failed, the connection closed or nothing came in time. */
export class ConnectionError extends Error {
  override name = 'ConnectionError';
  constructor(
    readonly kind: ConnectionFailure,
    readonly request: RequestInfo,
    /** The low-level reason (a system error code and message), for the curious. */
    readonly reason: string,
    /** The system error code (ENOTFOUND, ECONNREFUSED, ERR_SSL_WRONG_VERSION_NUMBER, …), when there is one. */
    readonly code: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(`${request.method} ${request.baseUrl}${request.path}: ${kind} (${reason})`, options);
  }
}

/** An answer that is not this service's API: not JSON, JSON of another shape, HTML, a proxy's error page. */
export class UnexpectedAnswerError extends Error {
  override name = 'UnexpectedAnswerError';
  constructor(
    readonly request: RequestInfo,
    readonly status: number,
    readonly contentType: string,
    /** What is wrong with it: "not JSON", "/items: expected array", … */
    readonly reason: string,
  ) {
    super(
      `The server at ${request.baseUrl} answered ${request.method} ${request.path} with something that is not this service's API (HTTP ${status} ${contentType}: ${reason})`,
    );
  }
}

const TLS_CODES = /^(ERR_SSL_|EPROTO$|ERR_TLS_|ECONNRESET_TLS)/;
const CERTIFICATE_CODES =
  /CERT|^(UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO_SELF_SIGNED_CERT|ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH)/;

/** A failed fetch (its `cause` holds the system error) as a ConnectionError; anything else as it is. */
export function connectionError(err: unknown, request: RequestInfo, timeoutMs?: number): unknown {
  if (err instanceof ConnectionError || err instanceof ProblemError || err instanceof UnexpectedAnswerError) return err;
  if ((err as Error)?.name === 'TimeoutError')
    return new ConnectionError('timeout', request, `within ${timeoutMs} ms`, undefined, { cause: err });
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  const code = cause?.code ?? '';
  const message = cause?.message ?? (err as Error)?.message ?? String(err);
  const reason = code ? `${code}: ${firstLine(message)}` : firstLine(message);
  const kind = kindOf(code, message);
  return kind ? new ConnectionError(kind, request, reason, code || undefined, { cause: err }) : err;
}

function kindOf(code: string, message: string): ConnectionFailure | undefined {
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') return 'host-not-found';
  if (code === 'ECONNREFUSED') return 'connection-refused';
  if (CERTIFICATE_CODES.test(code)) return 'certificate';
  if (TLS_CODES.test(code)) return 'tls';
  if (code.startsWith('HPE_')) return 'not-http';
  if (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE' || message === 'terminated')
    return 'connection-closed';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'ETIMEDOUT') return 'timeout';
  if (message === 'unknown scheme' || message === 'bad port' || message.startsWith('Invalid URL')) return 'bad-url';
  if (code.startsWith('E') || code.startsWith('UND_ERR')) return 'unreachable';
  if (message === 'fetch failed') return 'unreachable';
  return undefined;
}

const firstLine = (text: string) => text.split('\n')[0]!.trim();
