import { z } from '@hono/zod-openapi';
import { Int32, Timestamp } from '../vocabulary/input.js';
import { INSTANCE_STATUSES, INSTANCE_SUB_STATUSES } from '../engine/instance-state.js';

export {
  isFinished,
  JOB_STATUS,
  type JobStatus,
  type JobStatusName,
  PAUSE_REASONS,
  type PauseReason,
  PLAN_OUTCOMES,
  type PlanOutcome,
  planOutcome,
  PLAN_STATUS,
  type PlanStatus,
  type PlanStatusName,
  planStatusName,
  UNFINISHED_STATUSES,
  type Verification,
  VERIFICATIONS,
} from '../vocabulary/plan.js';
import { JOB_STATUS, type JobStatusName, PLAN_STATUS, VERIFICATIONS } from '../vocabulary/plan.js';

const rolloutControls = {
  rate: z
    .number()
    .min(1)
    .max(1_000_000)
    .nullish()
    .openapi({ description: 'At most this many instances per second (a throttle, not a target); null: none' }),
  stopOnFailureRatio: z
    .number()
    .min(0)
    .max(1)
    .nullish()
    .openapi({ description: 'Pause with pauseReason "failures" when failed ÷ finished exceeds it; null: never' }),
};

/** The rollout controls a running plan may change (PATCH …/rollout); null removes one. */
export const RolloutPatchSchema = z.strictObject(rolloutControls).openapi('RolloutPatch');

/** Rollout controls of a submitted plan (contract section 7). */
export const RolloutSchema = z
  .strictObject({
    ...rolloutControls,
    canary: Int32.min(1)
      .nullish()
      .openapi({ description: 'Process this many instances first, then pause with pauseReason "canary"' }),
  })
  .openapi('Rollout');
export type Rollout = z.infer<typeof RolloutSchema>;

export const LOG_LEVEL = { Trace: 0, Debug: 1, Information: 2, Warning: 3, Error: 4, Critical: 5 } as const;
export type LogLevel = (typeof LOG_LEVEL)[keyof typeof LOG_LEVEL];

/** One entry of a job's (or run result's) log: one per alteration attempted. */
export interface LogEntry {
  message: string;
  logLevel: LogLevel;
  timestamp: string;
  eventName: string | null;
}

/** An enum given as its integer or its name, read as the integer. */
function intOrName<T extends Record<string, number>>(values: T, what: string) {
  const names = Object.keys(values);
  const ints = Object.values(values);
  return z
    .union([z.number().int(), z.string()])
    .transform((v, ctx) => {
      const n = typeof v === 'number' ? v : /^\d+$/.test(v) ? Number(v) : values[v];
      if (n === undefined || !ints.includes(n)) {
        ctx.addIssue({
          code: 'custom',
          message: `Unknown ${what} ${JSON.stringify(v)}; expected one of ${names.map((k) => `${k} (${values[k]})`).join(', ')}`,
        });
        return z.NEVER;
      }
      return n as T[keyof T];
    })
    .openapi({
      description: `${what}: ${names.map((k) => `${k} = ${values[k]}`).join(', ')}; the integer or the name`,
    });
}

export const PlanStatusInput = intOrName(PLAN_STATUS, 'plan status');
export const JobStatusInput = intOrName(JOB_STATUS, 'job status');
const JOB_STATUS_NAMES = Object.keys(JOB_STATUS) as JobStatusName[];

/**
 * Alterations: each type is declared once in src/alterations/types/ (its schema, how it applies, how it is
 * summarized); the union of their schemas is `AlterationSchema`.
 */
export { AlterationSchema, type Alteration, type AlterationType } from './types/index.js';

/** Filter bounds (CONTRACT section 8): a filter compiles to bounded SQL whatever its author sends. */
export const FILTER_LIMITS = {
  listEntries: 1000,
  activityFilters: 20,
  incidentFilters: 20,
  messageContains: 200,
  timestampFilters: 10,
  stringLength: 1024,
} as const;

const FilterString = z.string().max(FILTER_LIMITS.stringLength);
const stringList = z.array(FilterString).max(FILTER_LIMITS.listEntries).nullish();

const TimestampFilterSchema = z.strictObject({
  column: z.enum(['CreatedAt', 'UpdatedAt', 'FinishedAt']),
  operator: z.enum(['Is', 'IsNot', 'LessThan', 'GreaterThan', 'LessThanOrEqual', 'GreaterThanOrEqual']),
  timestamp: Timestamp,
});

const ActivityFilterSchema = z.strictObject({
  activityId: FilterString.nullish(),
  nodeId: FilterString.nullish(),
  name: FilterString.nullish(),
  status: z.enum(['Running', 'Completed', 'Canceled', 'Faulted']).nullish(),
});

const IncidentFilterSchema = z.strictObject({
  activityId: FilterString.nullish(),
  activityType: FilterString.nullish(),
  messageContains: z
    .string()
    .min(1)
    .max(FILTER_LIMITS.messageContains)
    .nullish()
    .openapi({ description: "A case-insensitive substring of the incident's message" }),
});

const PlanJobsSchema = z
  .strictObject({
    planId: z.string().min(1).max(200),
    statuses: z
      // Given as integers or names, kept as names.
      .array(JobStatusInput.transform((n) => JOB_STATUS_NAMES.find((k) => JOB_STATUS[k] === n)!))
      .max(10)
      .nullish()
      .openapi({ description: 'Only jobs with these statuses; absent: every job of the plan' }),
    verifications: z.array(z.enum(VERIFICATIONS)).max(3).nullish().openapi({
      description:
        'Only completed jobs with these verifications (a plan without verify has none); a job of another status only where `statuses` names its status',
    }),
  })
  .openapi('PlanJobsFilter', {
    description:
      "The instances of a plan's jobs (a plan of the same tenant; an unknown one is a 400), optionally of some job statuses",
  });

/** The workflow instance filter: every field optional, AND across fields, strict. */
export const FilterSchema = z
  .strictObject({
    workflowInstanceIds: stringList,
    correlationIds: stringList,
    names: stringList,
    definitionIds: stringList,
    definitionVersionIds: stringList,
    searchTerm: FilterString
      // eslint-disable-next-line no-control-regex
      .regex(/^[^\u0000-\u001f]*$/, 'searchTerm must not contain control characters')
      .nullish(),
    statuses: z.array(z.enum(INSTANCE_STATUSES)).max(FILTER_LIMITS.listEntries).nullish(),
    subStatuses: z.array(z.enum(INSTANCE_SUB_STATUSES)).max(FILTER_LIMITS.listEntries).nullish(),
    hasIncidents: z.boolean().nullish(),
    isSystem: z.boolean().nullish(),
    activityFilters: z.array(ActivityFilterSchema).max(FILTER_LIMITS.activityFilters).nullish(),
    timestampFilters: z.array(TimestampFilterSchema).max(FILTER_LIMITS.timestampFilters).nullish(),
    incidentFilters: z
      .array(IncidentFilterSchema)
      .max(FILTER_LIMITS.incidentFilters)
      .nullish()
      .openapi({ description: "For each entry, the instance has an incident matching all the entry's given fields" }),
    planJobs: PlanJobsSchema.nullish(),
    emptyFilterSelectsAll: z.boolean().nullish(),
  })
  .openapi('WorkflowInstanceFilter', {
    description:
      'Fields combine with AND; absent, null and [] mean no constraint. A filter with no constraint selects nothing unless emptyFilterSelectsAll is true.',
  });
export type Filter = z.infer<typeof FilterSchema>;

/** The longest a plan waits for an instance to come to match its `verify.expect`: a day. */
export const VERIFY_MAX_SECONDS = 86_400;

/**
 * A plan's check of its effect: after a job completes, its instance must come to match `expect` within
 * `withinSeconds` of the completion. `expect` is about the instances' state, so it may not name instances
 * (`workflowInstanceIds`) or a plan's jobs (`planJobs`).
 */
export const VerifySchema = z
  .strictObject({
    expect: FilterSchema.superRefine((f, ctx) => {
      for (const field of ['workflowInstanceIds', 'planJobs'] as const)
        if (f[field] != null)
          ctx.addIssue({ code: 'custom', path: [field], message: `verify.expect may not use ${field}` });
    }),
    withinSeconds: Int32.min(1).max(VERIFY_MAX_SECONDS),
  })
  .openapi('PlanVerify', {
    description:
      "Each completed job's instance must come to match `expect` within `withinSeconds` (1 to 86400) of the job's completion",
  });
export type Verify = z.infer<typeof VerifySchema>;
export type TimestampFilter = z.infer<typeof TimestampFilterSchema>;
export type ActivityFilter = z.infer<typeof ActivityFilterSchema>;
export type IncidentFilter = z.infer<typeof IncidentFilterSchema>;
export type PlanJobsFilter = z.infer<typeof PlanJobsSchema>;
