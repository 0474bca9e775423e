import { createServer, type OutgoingHttpHeaders, type Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { getRequestListener, RequestError } from '@hono/node-server';
import { problemBody } from './problem.js';

const CLIENT_ERRORS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'The request headers are too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'The request was not received in time'],
  ERR_HTTP_HEADERS_TIMEOUT: [408, 'The request headers were not received in time'],
};

/**
 * The Node adapter gives every response without a content type `text/plain`; a 204 (or 304) has no body,
 * so it gets none.
 */
class ApiResponse extends ServerResponse {
  override writeHead(status: number, ...rest: unknown[]): this {
    if (status === 204 || status === 304) {
      const headers = rest[rest.length - 1];
      if (headers && typeof headers === 'object' && !Array.isArray(headers)) {
        for (const name of Object.keys(headers))
          if (name.toLowerCase() === 'content-type') delete (headers as OutgoingHttpHeaders)[name];
      }
      this.removeHeader('content-type');
    }
    return (super.writeHead as (...args: unknown[]) => this)(status, ...rest);
  }
}

/**
 * What the adapter cannot turn into a `Request` (no `Host` on an HTTP/1.0 request, an invalid `Host` or
 * absolute URL) is a 400, and a fetch that throws instead of answering (the app's `onError` normally
 * answers first) a 500; the adapter's own answers for both are bodiless `text/plain`.
 */
function adapterError(err: unknown): Response {
  const [status, detail] =
    err instanceof RequestError
      ? [
          400,
          err.message === 'Missing host header'
            ? 'The request has no Host header; send one naming this server'
            : `The request's target cannot be read (${err.message}); send a path and a valid Host header`,
        ]
      : [500, 'The request could not be answered; try again later'];
  return new Response(problemBody(status, detail), {
    status,
    headers: { 'content-type': 'application/problem+json', connection: 'close' },
  });
}

/**
 * Serves the app over HTTP. Requests Node itself refuses before the app sees them (headers too large,
 * malformed requests) are answered with problem+json too, while the socket can still take an answer, and
 * so are those the adapter cannot make a `Request` of. The address listened on is not taken as the
 * default `Host` (as `serve` of @hono/node-server does), so a request without one is answered alike
 * whichever address the server binds.
 */
export function serveApi(
  app: { fetch: (request: Request, env?: unknown) => Response | Promise<Response> },
  opts: { port: number; hostname?: string; requestBodyTimeoutMs?: number },
): Server {
  const listener = getRequestListener(app.fetch, { errorHandler: adapterError });
  // Headers that take longer than REQUEST_BODY_TIMEOUT_MS end with a 408 (Node's own timeout, answered below as
  // problem+json); a body is timed by the app (src/api/body-arrival.ts), which answers 408 itself, so Node's
  // whole-request timeout is only a backstop past both. Node looks for late connections every second.
  const timeoutMs = opts.requestBodyTimeoutMs ?? 10_000;
  const server = createServer(
    {
      ServerResponse: ApiResponse as typeof ServerResponse,
      headersTimeout: timeoutMs,
      requestTimeout: 2 * timeoutMs + 5_000,
      connectionsCheckingInterval: Math.min(1_000, timeoutMs),
    },
    (req, res) => {
      void listener(req, res);
    },
  );
  server.listen(opts.port, opts.hostname);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    const [status, detail] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'The request is not valid HTTP'];
    const body = problemBody(status, detail);
    socket.end(
      `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\n` +
        `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  return server;
}
