import type { Context } from 'hono';
import { routePath } from 'hono/route';

/** The one label of every request no route matched (an unknown path, a method a path does not allow). */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * The route template that answered a request, as the OpenAPI document writes it (`/alterations/{planId}`),
 * for metrics: never the raw path, which would make a series per plan id (unbounded, and an id in a label).
 * Read after the request ran: Hono's current route is then the one whose handler (or guard) answered; a
 * request no route matched ends in the catch-all middleware (`*`).
 */
export function routeLabel(c: Context): string {
  const path = routePath(c);
  if (!path || path.includes('*')) return UNMATCHED_ROUTE;
  return path.replace(/:(\w+)(\{[^}]*\})?\??/g, '{$1}');
}
