import { z } from '@hono/zod-openapi';
import {
  AlterationSchema,
  FilterSchema,
  JOB_STATUS,
  LOG_LEVEL,
  PAUSE_REASONS,
  PLAN_OUTCOMES,
  PLAN_STATUS,
  RolloutSchema,
  VERIFICATIONS,
} from './model.js';
import { ScheduleSchema } from './schedule.js';

/**
 * What the API shows of plans and jobs, defined once: the routes document these schemas, the read models
 * return their inferred types and the typed client (src/client) is built on them.
 */

const enumDescription = (values: Record<string, number>) =>
  Object.entries(values)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');

export const LogEntrySchema = z
  .object({
    message: z.string(),
    logLevel: z
      .number()
      .int()
      .openapi({ description: enumDescription(LOG_LEVEL) }),
    timestamp: z.string(),
    eventName: z.string().nullable(),
  })
  .openapi('AlterationLogEntry');
export type LogEntryView = z.infer<typeof LogEntrySchema>;

export const JobCountsSchema = z.object({
  total: z.number().int(),
  pending: z.number().int(),
  running: z.number().int(),
  completed: z.number().int(),
  failed: z.number().int(),
  cancelled: z.number().int(),
  skipped: z.number().int().openapi({
    description:
      "Jobs left alone: the plan's set was fixed while it awaited approval, and the instance no longer matched its filter when the job's batch ran",
  }),
});
export type JobCounts = z.infer<typeof JobCountsSchema>;

// Not a named component: `decidedBy` is nullable, and OpenAPI 3.0 ignores `nullable` beside a `$ref` (a
// validator then refuses the null an undecided plan carries).
const PrincipalRefSchema = z.object({ kind: z.enum(['user', 'apiKey']), id: z.string(), name: z.string() });

/** A plan's approval (section 10): who asked, what the filter matched then, until when, who decided. */
export const ApprovalSchema = z
  .object({
    state: z.enum(['Pending', 'Approved', 'Rejected', 'Expired', 'Withdrawn']),
    requestedBy: PrincipalRefSchema,
    matchedCount: z.number().int().openapi({
      description: "The plan's jobs: the instances it will change once approved (its set is fixed while it waits)",
    }),
    expiresAt: z.string(),
    decidedBy: PrincipalRefSchema.nullable(),
    decidedAt: z.string().nullable(),
    comment: z.string().nullable(),
    heldBecause: z.string().optional().openapi({
      description:
        "Why the policy held the plan when its jobs were made, though it needed no approval at submission (e.g. the filter matched more instances by then, or the tenant's changes without approval in the last hour add up past the threshold)",
    }),
  })
  .openapi('PlanApproval');

export const PlanSchema = z
  .object({
    id: z.string(),
    alterations: z.array(AlterationSchema),
    workflowInstanceFilter: FilterSchema,
    status: z
      .number()
      .int()
      .openapi({ description: enumDescription(PLAN_STATUS) }),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    completedAt: z.string().nullable(),
    jobCounts: JobCountsSchema,
    failureReason: z
      .string()
      .nullable()
      .openapi({ description: 'Why the plan could not be processed (status Failed); null otherwise' }),
    rollout: RolloutSchema.openapi({
      description: 'The rollout controls as submitted and patched; a control not asked for is null',
    }),
    pauseReason: z
      .enum(PAUSE_REASONS)
      .nullable()
      .openapi({ description: 'Why the plan is Paused (manual, canary, failures or schedule); null unless Paused' }),
    revertOf: z.string().nullable().openapi({ description: 'The plan this plan reverts; null for other plans' }),
    retryOf: z
      .string()
      .nullable()
      .openapi({ description: 'The plan whose failed jobs this plan retries (retry-failed); null for other plans' }),
    verification: z
      .object({
        expect: FilterSchema,
        withinSeconds: z.number().int(),
        verified: z.number().int(),
        unverified: z.number().int(),
        pending: z.number().int().openapi({ description: 'Completed jobs whose instance is still to match in time' }),
      })
      .nullable()
      .openapi({ description: "The plan's verify and how its completed jobs stand against it; null without verify" }),
    outcome: z
      .enum(PLAN_OUTCOMES)
      .nullable()
      .openapi({
        description:
          'How the jobs of a Completed plan ended: allSucceeded, someFailed, allFailed (every job failed; the plan ' +
          'is Completed all the same, as the contract says) or noJobs (the filter matched nothing); null unless Completed',
      }),
    drift: z
      .object({
        skipped: z.number().int().openapi({ description: 'Jobs skipped: their instance no longer matched the filter' }),
        joined: z.number().int().nullable().openapi({
          description:
            'Instances matching the filter when the plan completed that were not in its set (not added); null until it completed',
        }),
      })
      .nullable()
      .openapi({
        description:
          'How the instances moved against a set fixed while the plan awaited approval; null for a plan that needed none',
      }),
    approval: ApprovalSchema.nullable().openapi({
      description: 'The approval the plan needed; null when it needed none',
    }),
    schedule: ScheduleSchema.nullable().openapi({
      description: 'When the plan may run, as submitted; null: any time (or dropped by a resume with ignoreSchedule)',
    }),
    resumesAt: z.string().nullable().openapi({
      description: 'When a plan paused by its schedule goes on by itself; null unless pauseReason is schedule',
    }),
  })
  .openapi('AlterationPlan');
export type PlanView = z.infer<typeof PlanSchema>;

/**
 * A plan in a list: the plan without its filter and with its alterations replaced by their types and count
 * (both may be large; read one plan for them), so that a page stays small whatever the plans hold.
 */
export const PlanSummarySchema = PlanSchema.omit({ alterations: true, workflowInstanceFilter: true })
  .extend({
    alterationTypes: z
      .array(z.string())
      .openapi({ description: "The distinct types of the plan's alterations, in order of first use" }),
    alterationCount: z.number().int().openapi({ description: 'How many alterations the plan has' }),
  })
  .openapi('AlterationPlanSummary');
export type PlanSummaryView = z.infer<typeof PlanSummarySchema>;

export const JobSchema = z
  .object({
    id: z.string(),
    planId: z.string(),
    workflowInstanceId: z.string(),
    status: z
      .number()
      .int()
      .openapi({ description: enumDescription(JOB_STATUS) }),
    verification: z.enum(VERIFICATIONS).nullable().openapi({
      description: "Whether the instance came to match the plan's verify.expect in time; null without verify",
    }),
    log: z.array(LogEntrySchema),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    completedAt: z.string().nullable(),
  })
  .openapi('AlterationJob');
export type JobView = z.infer<typeof JobSchema>;

export const InstanceChangeSchema = z
  .object({
    planId: z.string(),
    jobId: z.string(),
    status: z
      .number()
      .int()
      .openapi({ description: enumDescription(JOB_STATUS) }),
    verification: z
      .enum(VERIFICATIONS)
      .nullable()
      .openapi({ description: "Whether the instance came to match the plan's verify.expect; null without verify" }),
    alterationTypes: z.array(z.string()).openapi({ description: "The plan's alteration types (Revert for a revert)" }),
    log: z.array(LogEntrySchema),
    completedAt: z.string().nullable(),
  })
  .openapi('InstanceChange');
export type InstanceChange = z.infer<typeof InstanceChangeSchema>;

export const RunResultSchema = z
  .object({
    workflowInstanceId: z.string(),
    isSuccessful: z.boolean(),
    workflowHasScheduledWork: z.boolean(),
    log: z.array(LogEntrySchema),
  })
  .openapi('AlterationRunResult');
export type RunResultView = z.infer<typeof RunResultSchema>;

export const PreviewItemSchema = z
  .object({
    workflowInstanceId: z.string(),
    isSuccessful: z.boolean(),
    log: z.array(LogEntrySchema),
    changes: z.array(
      z.object({
        path: z.string().openapi({ description: 'A JSON pointer into the instance, e.g. /variables/amount' }),
        before: z.unknown().optional().openapi({
          description:
            'The value before; left out for a principal that may not read instances (workflows/instances:view)',
        }),
        after: z.unknown().optional().openapi({
          description:
            'The value after; left out for a principal that may not read instances (workflows/instances:view)',
        }),
      }),
    ),
  })
  .openapi('AlterationPreviewItem');
export type PreviewItem = z.infer<typeof PreviewItemSchema>;
