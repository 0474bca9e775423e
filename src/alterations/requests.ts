import { z } from '@hono/zod-openapi';
import { Int32 } from '../vocabulary/input.js';
import { AlterationSchema, FilterSchema, RolloutSchema, VerifySchema } from './model.js';
import { ScheduleSchema } from './schedule.js';

/**
 * The bodies a plan is asked for with, defined once below both doors: the API's routes validate and document
 * them (src/api/routes), and the console's forms validate with the same schemas (src/console), so neither
 * imports the other's files.
 */

export const Alterations = z.array(AlterationSchema).min(1).max(100);
/** Words that are routes under /alterations: a plan named so could not be reached by its id. */
const ROUTE_WORDS = ['submit', 'dry-run', 'run', 'preview', 'workflows', 'policy'];
export const PlanId = z
  .string()
  .regex(/^[\w.:-]{1,100}$/, 'A plan id is 1 to 100 letters, digits, "_", "-", "." or ":"')
  .refine((id) => !ROUTE_WORDS.includes(id), `A plan id may not be ${ROUTE_WORDS.join(', ')} (routes of their own)`)
  // A path segment of "." or ".." is resolved away by every client and by the router: no route could reach it.
  .refine(
    (id) => id !== '.' && id !== '..',
    'A plan id may not be "." or ".." (a path segment that cannot be addressed)',
  );

/** The body of `POST /alterations/submit`; the console's New plan validates with it too. */
export const SubmitSchema = z
  .strictObject({
    id: PlanId.optional().openapi({
      description: 'Client-chosen plan id: resubmitting the same id and body is idempotent',
    }),
    alterations: Alterations,
    filter: FilterSchema,
    rollout: RolloutSchema.optional().openapi({
      description: 'Optional rollout controls (contract section 7): rate, canary, stopOnFailureRatio',
    }),
    approval: z
      .strictObject({ required: z.literal(true) })
      .nullish()
      .openapi({
        description:
          "Ask for a second principal's approval whatever the tenant's policy says (a submitter cannot opt out of the policy)",
      }),
    schedule: ScheduleSchema.nullish().openapi({
      description: 'When the plan may run: not before a moment, and only inside weekly windows in a time zone',
    }),
    verify: VerifySchema.nullish(),
  })
  .openapi('SubmitAlterationPlanRequest');

/** The body of `POST /alterations/preview` (and the console's Preview). */
export const PreviewSchema = z
  .strictObject({
    alterations: Alterations,
    filter: FilterSchema,
    limit: Int32.min(1).max(100).default(10).openapi({ description: 'Instances to preview (1 to 100)' }),
  })
  .openapi('PreviewAlterationsRequest');

/** What a retry-failed takes again: the jobs that failed and, with `verify`, those not verified. */
export const RETRY_INCLUDES = ['Failed', 'Unverified'] as const;
export type RetryInclude = (typeof RETRY_INCLUDES)[number];

/** The body of `POST /alterations/{planId}/retry-failed`. */
export const RetryFailedSchema = z
  .strictObject({
    id: PlanId.optional().openapi({ description: 'Client-chosen id of the retry plan (idempotent)' }),
    include: z
      .array(z.enum(RETRY_INCLUDES))
      .min(1)
      .max(RETRY_INCLUDES.length)
      .optional()
      .openapi({ description: 'Which jobs to retry (default both)' }),
  })
  .openapi('RetryFailedRequest');

/** The body of approve and reject (the console's decision form validates with it too). */
export const DecisionSchema = z
  .strictObject({ comment: z.string().max(2000).nullish().openapi({ description: 'Why, for the record' }) })
  .openapi('PlanDecisionRequest');
