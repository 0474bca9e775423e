import type { OpenAPIHono, RouteConfig } from '@hono/zod-openapi';
import { type ProblemStatus, problems } from './schemas.js';

/**
 * Completes every operation's problem responses in one place, so no route can forget one: 500 and 503
 * (statement timeouts, an unavailable database) everywhere; 400 everywhere too (the input rule applies to
 * every path parameter, query value and body a request carries); 401 wherever credentials are needed.
 */
export function documentProblems(registry: OpenAPIHono['openAPIRegistry']): void {
  for (const def of registry.definitions) {
    if (def.type !== 'route') continue;
    const route = def.route as RouteConfig;
    const codes: ProblemStatus[] = [400, 500, 503];
    // Credentials are needed: 401, and 429 once a client guesses too many API keys (section 8).
    if ((route.security ?? []).length > 0) codes.push(401, 429);
    const responses = route.responses as Record<string, unknown>;
    for (const [code, response] of Object.entries(problems(...codes))) {
      if (!(code in responses)) responses[code] = response;
    }
  }
}
