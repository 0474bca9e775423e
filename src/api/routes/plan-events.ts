import { OpenAPIHono, z } from '@hono/zod-openapi';
import { ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import type { TenantCounter } from '../../shares.js';
import { type AppEnv } from '../context.js';
import { problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

import { planEventStream } from '../plan-event-stream.js';

const VIEW = ALTERATIONS_VIEW;

/** One event of the stream, as a server-sent event (`event:` and `data:` lines). */
const PlanEventSchema = z
  .object({
    event: z.enum(['progress', 'done']),
    data: z.string().openapi({
      description:
        'JSON. progress: {status, jobCounts, instancesPerSecond, pauseReason, resumesAt, approval: {state, decidedBy, decidedAt, comment} | null, verification, drift} (verification and drift as in the plan view); done: the finished plan (as GET /alterations/{planId} `plan`)',
    }),
  })
  .openapi('PlanEvent');

const events = secureRoute(VIEW, {
  method: 'get',
  path: '/alterations/{planId}/events',
  tags: ['Alterations'],
  summary:
    'Live progress of a plan as server-sent events: `progress` at once and on change, then `done`; the stream ends',
  description:
    'Each `progress` event carries `{status, jobCounts, instancesPerSecond, pauseReason, resumesAt, approval, verification, drift}` ' +
    '(approval: its state, who decided, when, the comment; null when the plan needed none; verification and drift as in the plan view); the last event, `done`, ' +
    'carries the finished plan view. Read from Postgres, so any API node serves any plan; a client that reconnects gets ' +
    'the current state at once.',
  request: { params: z.object({ planId: z.string() }) },
  responses: {
    200: { description: 'The event stream', content: { 'text/event-stream': { schema: PlanEventSchema } } },
    ...problems(401, 403, 404, 429, 503),
  },
});

export function planEventRoutes(streams: TenantCounter, shutdown?: AbortSignal) {
  const app = new OpenAPIHono<AppEnv>();
  // Section 10: each progress event also says where the plan's approval stands and when a plan paused by its
  // schedule goes on, so a client sees status 8 and the decision as they happen.
  app.openapi(events, (c) =>
    planEventStream(c, c.req.valid('param').planId, streams, shutdown, (plan) => ({
      resumesAt: plan.resumesAt,
      approval: plan.approval
        ? {
            state: plan.approval.state,
            decidedBy: plan.approval.decidedBy,
            decidedAt: plan.approval.decidedAt,
            comment: plan.approval.comment,
          }
        : null,
      verification: plan.verification,
      drift: plan.drift,
    })),
  );
  return app;
}
