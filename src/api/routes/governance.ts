import { mayReadInstances } from '../authorize.js';
import { OpenAPIHono, z } from '@hono/zod-openapi';
import { DecisionSchema } from '../../alterations/requests.js';
import { getPolicy, principalRef, putPolicy } from '../../alterations/governance.js';
import { getPlanView } from '../../alterations/plans.js';
import { previewShown, previewStoredPlan } from '../../alterations/preview.js';
import { PreviewItemSchema } from '../../alterations/views.js';
import { ALTERATIONS_APPROVE, ALTERATIONS_POLICY_UPDATE, ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import { jsonInSlices } from '../../vocabulary/time-slice.js';
import { QueryInt32 } from '../../vocabulary/input.js';
import { type AppEnv, callerTenant } from '../context.js';
import { decidePlanCommand } from '../plan-commands.js';
import { bodyRoute, PlanParams, PlanStatusAnswer, planCommandRoute } from '../route-shapes.js';
import { jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';
import { writtenJson } from '../written-json.js';

/** Section 10: who may decide plans and set the policy (the console checks the same specs). */
const APPROVE = ALTERATIONS_APPROVE;
const POLICY_UPDATE = ALTERATIONS_POLICY_UPDATE;
const VIEW = ALTERATIONS_VIEW;
const TAGS = ['Plan governance'];

const PolicySchema = z
  .strictObject({
    approval: z.enum(['never', 'always', 'above']).openapi({
      description:
        'never; always; or above: when the filter matches more than approvalThreshold instances at submission',
    }),
    approvalThreshold: z.number().int().min(1).max(2_147_483_647).nullable(),
    approvalTtlSeconds: z
      .number()
      .int()
      .min(60)
      .max(2_592_000)
      .openapi({ description: 'How long a plan awaits approval before it expires (60 s to 30 days)' }),
  })
  .refine((p) => p.approval !== 'above' || p.approvalThreshold !== null, {
    path: ['approvalThreshold'],
    message: '"above" needs an approvalThreshold: the number of matched instances above which a plan needs approval',
  })
  .openapi('ApprovalPolicy');

const readPolicy = secureRoute(VIEW, {
  method: 'get',
  path: '/alterations/policy',
  tags: TAGS,
  summary: "The tenant's approval policy: which plans need a second principal's approval",
  responses: { 200: jsonContent(PolicySchema, 'The policy (the default when none was set)'), ...problems(401, 403) },
});

const writePolicy = bodyRoute(POLICY_UPDATE, 'put', '/alterations/policy', {
  tags: TAGS,
  summary: "Set the tenant's approval policy",
  body: PolicySchema,
  answer: { 200: jsonContent(PolicySchema, 'The policy now') },
});

const decideRoute = (decision: 'approve' | 'reject') =>
  planCommandRoute(APPROVE, decision, {
    tags: TAGS,
    summary:
      decision === 'approve'
        ? 'Approve a plan awaiting approval: it goes on as if just submitted (not by the principal that submitted it)'
        : 'Reject a plan awaiting approval: it is Cancelled, no job runs',
    body: DecisionSchema,
    answer: {
      202: jsonContent(PlanStatusAnswer, decision === 'approve' ? 'Approved: the status it has now' : 'Rejected'),
    },
  });

const storedPreview = secureRoute(VIEW, {
  method: 'get',
  path: '/alterations/{planId}/preview',
  tags: TAGS,
  summary:
    'What the stored plan would do now to the first instances it matches (for an approver to read); writes nothing',
  request: {
    ...PlanParams,
    query: z.strictObject({ limit: QueryInt32.min(1).max(100).default(10) }),
  },
  responses: {
    200: jsonContent(
      z.object({ matchedCount: z.number().int(), items: z.array(PreviewItemSchema) }),
      'How many instances match now, and the outcome and changes for the first `limit`',
    ),
    ...problems(400, 401, 403, 404),
  },
});

/** Plan governance (section 10): the approval policy, decisions on plans awaiting approval, a stored plan's preview. */
export function governanceRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(readPolicy, async (c) => c.json(await getPolicy(c.get('deps').pool, callerTenant(c)), 200));
  app.openapi(writePolicy, async (c) => {
    const body = c.req.valid('json');
    const policy = await putPolicy(c.get('deps').pool, callerTenant(c), body, principalRef(c.get('principal')));
    c.get('logger').info({ policy }, 'approval policy changed');
    return c.json(policy, 200);
  });
  for (const decision of ['approve', 'reject'] as const) {
    app.openapi(decideRoute(decision), async (c) => {
      const { planId } = c.req.valid('param');
      const comment = c.req.valid('json').comment ?? null;
      const { status } = await decidePlanCommand(c.get('deps'), c.get('principal'), planId, decision, comment);
      return c.json({ planId, status }, 202);
    });
  }
  app.openapi(storedPreview, async (c) => {
    const { pool, definitions } = c.get('deps');
    const tenant = callerTenant(c);
    const plan = await getPlanView(pool, tenant, c.req.valid('param').planId);
    const { limit } = c.req.valid('query');
    // A revert has no alterations of its own: what it would restore, from its plan's before-images.
    const preview = previewShown(
      await previewStoredPlan({ pool, definitions }, tenant, plan, limit, c.req.raw.signal),
      mayReadInstances(c),
    );
    return writtenJson(c, await jsonInSlices(preview, 'items', preview.items));
  });
  return app;
}
