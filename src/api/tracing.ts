import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  trace,
  type Tracer,
} from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import type { AppEnv } from './context.js';

const fromHeaders: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

/**
 * A span per request, the parent of everything the request does (its Temporal starts and signals, and
 * through them the workflows and activities they cause). A caller's W3C `traceparent` makes it a child of
 * the caller's span. Named by method and route template (`GET /alterations/:planId`), never by the raw
 * path: ids would make every request a span name of its own.
 */
export function traceRequests(tracer: Tracer): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const parent = propagation.extract(ROOT_CONTEXT, c.req.raw.headers, fromHeaders);
    const span = tracer.startSpan(
      c.req.method,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': c.req.method, 'url.path': c.req.path, 'url.scheme': scheme(c.req.url) },
      },
      parent,
    );
    // The problem documents' `traceId` (src/api/problem.ts), the one the log lines carry.
    c.set('traceId', span.spanContext().traceId);
    try {
      await context.with(trace.setSpan(parent, span), next);
      // The route that answered; a path no route matched (a 404) has none, and the span is named by its method.
      const route = routePath(c);
      if (route && !route.includes('*')) {
        span.setAttribute('http.route', route);
        span.updateName(`${c.req.method} ${route}`);
      }
      const status = c.res.status;
      span.setAttribute('http.response.status_code', status);
      // A server span is an error on 5xx only: a 4xx is the client's mistake, not the service's.
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  };
}

function scheme(url: string): string {
  return url.startsWith('https:') ? 'https' : 'http';
}
