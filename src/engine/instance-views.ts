import { z } from '@hono/zod-openapi';
import { INSTANCE_STATUSES, INSTANCE_SUB_STATUSES } from './instance-state.js';

/**
 * What the API shows of instances, defined once: the routes document these schemas and the read models
 * return their inferred types, so a field added here is both documented and type-checked.
 */

export const InstanceStatusSchema = z.enum(INSTANCE_STATUSES);
export const InstanceSubStatusSchema = z.enum(INSTANCE_SUB_STATUSES);
export const ACTIVITY_RECORD_STATUSES = ['Running', 'Completed', 'Canceled', 'Faulted'] as const;
export type ActivityRecordStatus = (typeof ACTIVITY_RECORD_STATUSES)[number];

export const InstanceSummarySchema = z
  .object({
    id: z.string(),
    definitionId: z.string(),
    version: z.number().int(),
    name: z.string().nullable(),
    correlationId: z.string().nullable(),
    status: InstanceStatusSchema,
    subStatus: InstanceSubStatusSchema,
    incidentCount: z.number().int(),
    createdAt: z.string(),
    updatedAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .openapi('WorkflowInstanceSummary');
export type InstanceSummary = z.infer<typeof InstanceSummarySchema>;

export const InstanceViewSchema = z
  .object({
    id: z.string(),
    definitionId: z.string(),
    definitionVersionId: z.string(),
    version: z.number().int(),
    name: z.string().nullable(),
    correlationId: z.string().nullable(),
    status: InstanceStatusSchema,
    subStatus: InstanceSubStatusSchema,
    isSystem: z.boolean(),
    incidentCount: z.number().int(),
    incidents: z.array(
      z.object({ activityId: z.string(), activityType: z.string(), message: z.string(), timestamp: z.string() }),
    ),
    variables: z.array(z.object({ id: z.string(), name: z.string(), typeName: z.string(), value: z.unknown() })),
    scheduledActivityIds: z.array(z.string()),
    bookmarks: z.array(z.object({ activityId: z.string(), eventName: z.string() })),
    activityRecords: z.array(
      z.object({
        activityId: z.string(),
        nodeId: z.string(),
        activityType: z.string(),
        name: z.string().nullable(),
        status: z.enum(ACTIVITY_RECORD_STATUSES),
        inputs: z.record(z.string(), z.unknown()),
        startedAt: z.string(),
        completedAt: z.string().nullable(),
      }),
    ),
    journal: z.array(z.object({ activityId: z.string(), message: z.string(), timestamp: z.string() })),
    createdAt: z.string(),
    updatedAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .openapi('WorkflowInstance');
export type InstanceView = z.infer<typeof InstanceViewSchema>;

export const IncidentGroupSchema = z
  .object({
    definitionId: z.string(),
    version: z.number().int(),
    activityId: z.string(),
    activityType: z.string(),
    message: z.string().openapi({ description: "The incidents' message, its first 200 characters" }),
    count: z.number().int().openapi({ description: 'How many instances have such an incident' }),
    firstAt: z.string(),
    lastAt: z.string(),
    sampleInstanceIds: z.array(z.string()).openapi({ description: 'Up to 5 of them, the latest to fault first' }),
  })
  .openapi('IncidentGroup');
export type IncidentGroup = z.infer<typeof IncidentGroupSchema>;

export const ActivityCountsSchema = z
  .object({
    definitionId: z.string(),
    version: z.number().int(),
    items: z.array(
      z.object({
        activityId: z.string(),
        type: z.string(),
        name: z.string().nullable(),
        waiting: z.number().int().openapi({ description: 'Unfinished instances waiting on it (a bookmark)' }),
        scheduled: z.number().int().openapi({ description: 'Unfinished instances that have it scheduled' }),
        faulted: z.number().int().openapi({ description: 'Unfinished instances with an incident on it' }),
      }),
    ),
  })
  .openapi('ActivityCounts');
