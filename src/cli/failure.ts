import { ConnectionError, ProblemError, UnexpectedAnswerError } from '../client/index.js';
import { safeCell } from './format.js';
import { type Target, where } from './target.js';

/**
 * How `wfa` reports a failure: one problem document (the service's own problem+json when it sent one, else
 * one the CLI makes, with a type under /problems/cli/), printed as `error: …` lines for people or as
 * `{"error": {…}}` on standard error with --json. A message names the URL, what is wrong and what to check;
 * never a stack.
 */

/** Thrown to end with a message and an exit code (1 unless said otherwise). */
export class CliFailure extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
    /** The last segment of the problem type, /problems/cli/{kind}. */
    readonly kind = 'usage',
  ) {
    super(message);
  }
}

/** Ctrl-C: the message says what goes on (not an error of the CLI); exit 130 as a shell does. */
export class Interrupted extends CliFailure {
  constructor(message: string) {
    super(message, 130, 'interrupted');
  }
}

export interface CliProblem {
  type: string;
  title: string;
  /** The HTTP status of the answer; null when nothing (or nothing of this service's API) answered. */
  status: number | null;
  detail: string;
  errors?: { path: string; message: string }[];
  [member: string]: unknown;
}

const TITLES: Record<string, string> = {
  'bad-url': 'Invalid URL',
  'host-not-found': 'Host not found',
  'connection-refused': 'Connection refused',
  tls: 'TLS failed',
  certificate: 'Certificate not trusted',
  'not-http': 'Not HTTP',
  'connection-closed': 'Connection closed',
  timeout: 'No answer in time',
  unreachable: 'Unreachable',
  'not-this-api': "Not this service's API",
  usage: 'Usage error',
  'not-signed-in': 'Not signed in',
  'bad-file': 'Unreadable file',
  interrupted: 'Interrupted',
  error: 'Error',
};

const cliProblem = (kind: string, detail: string, extra: Partial<CliProblem> = {}): CliProblem => ({
  type: `/problems/cli/${kind}`,
  title: TITLES[kind] ?? 'Error',
  status: null,
  detail,
  ...extra,
});

/** The problem document of any failure; `target` is where the CLI was talking to, to name it. */
export function problemOf(err: unknown, target: Target | undefined): CliProblem {
  if (err instanceof ProblemError) {
    const sent = err.problem;
    return {
      ...sent,
      type: typeof sent.type === 'string' ? sent.type : 'about:blank',
      title: err.title,
      status: err.status,
      detail: err.detail,
      ...(err.errors.length ? { errors: err.errors } : {}),
    };
  }
  if (err instanceof ConnectionError) {
    const url = target?.url ?? err.request.baseUrl;
    return cliProblem(err.kind, connectionDetail(err, target), { url });
  }
  if (err instanceof UnexpectedAnswerError) {
    const url = target?.url ?? err.request.baseUrl;
    const at = target ? where(target) : url;
    return cliProblem(
      'not-this-api',
      `the server at ${at} answered something that is not this service's API (HTTP ${err.status} ${err.contentType}: ${err.reason}); check that the URL is the workflow-alterations service's`,
      { status: err.status, url },
    );
  }
  if (err instanceof CliFailure) return cliProblem(err.kind, err.message);
  return cliProblem('error', err instanceof Error ? err.message : String(err));
}

function connectionDetail(err: ConnectionError, target: Target | undefined): string {
  const url = new URL(target?.url ?? err.request.baseUrl);
  const at = target ? where(target) : url.href;
  const hostPort = `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  const request = `${err.request.method} ${err.request.path}`;
  const otherScheme = `${url.protocol === 'https:' ? 'http' : 'https'}://${url.host}${url.pathname.replace(/\/$/, '')}`;
  switch (err.kind) {
    case 'host-not-found':
      return `could not resolve host ${url.hostname} in ${at}; check the host name${err.code && err.code !== 'ENOTFOUND' ? ` (${err.code}: the DNS lookup failed; check the network)` : ''}`;
    case 'connection-refused':
      return `nothing listens at ${hostPort} in ${at} (connection refused); is the service running, and on that port?`;
    case 'tls':
      return `the server at ${at} does not speak TLS (${err.code ?? err.reason}); if it serves plain HTTP, use ${otherScheme}`;
    case 'certificate':
      return `the TLS certificate of ${url.hostname} in ${at} is not trusted (${err.reason}); check the host name, or trust its CA with NODE_EXTRA_CA_CERTS`;
    case 'not-http':
      return `the server at ${at} does not speak HTTP (${err.reason}); check the port${url.protocol === 'http:' ? ` (if it serves HTTPS, use ${otherScheme})` : ''}`;
    case 'connection-closed':
      return `the server at ${at} closed the connection without a whole answer to ${request}; check that the URL is the workflow-alterations service's, and its log`;
    case 'timeout':
      return `the server at ${at} did not answer ${request} ${err.code ? `in time (${err.reason})` : err.reason} (--timeout); check that the URL is the workflow-alterations service's and that it is not overloaded`;
    case 'bad-url':
      return err.reason === 'bad port'
        ? `${at} cannot be used: Node's fetch refuses port ${url.port} (a port browsers block); serve the service on another port`
        : `${at} cannot be used (${err.reason})`;
    default:
      return `could not reach ${at} (${err.reason}); check the URL and the network`;
  }
}

/** The problem as people read it: `error: detail (HTTP n)` and a line per offending field, all escaped. */
export function humanProblem(p: CliProblem): string {
  if (p.type === '/problems/cli/interrupted') return safeCell(p.detail);
  const fromService = !p.type.startsWith('/problems/cli/') && p.status !== null;
  const fields = (p.errors ?? []).slice(0, 50).map((e) => `  ${safeCell(e.path || '/')}: ${safeCell(e.message)}`);
  return [`error: ${safeCell(p.detail)}${fromService ? ` (HTTP ${p.status})` : ''}`, ...fields].join('\n');
}

/** The problem for scripts: one line of JSON, `{"error": {type, title, status, detail, …}}`. */
export function jsonProblem(p: CliProblem): string {
  return JSON.stringify({ error: p });
}

export function exitCodeOf(err: unknown): number {
  return err instanceof CliFailure ? err.exitCode : 1;
}
