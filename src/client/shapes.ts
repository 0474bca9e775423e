import { z } from 'zod';

/**
 * The shapes the client checks answers against before handing them out: the members a caller (the `wfa`
 * CLI) reads, with their types, so that an answer from another server fails with a clear error instead of
 * a TypeError far away. Loose on purpose: members not named here pass (a newer service may add some), and
 * the caller gets the answer as sent, not a stripped copy. The full schemas are the service's
 * (src/alterations/views.ts and its neighbours); these are what a client can rely on.
 */

const obj = z.looseObject;
const nullableString = z.string().nullable();

export const anyObject = obj({});

const logEntry = obj({ message: z.string(), logLevel: z.number(), timestamp: z.string() });

export const jobCounts = obj({
  total: z.number(),
  pending: z.number(),
  running: z.number(),
  completed: z.number(),
  failed: z.number(),
  cancelled: z.number(),
});

const planFields = {
  id: z.string(),
  status: z.number(),
  createdAt: z.string(),
  completedAt: nullableString,
  jobCounts,
  failureReason: nullableString.optional(),
  rollout: obj({
    rate: z.number().nullish(),
    canary: z.number().nullish(),
    stopOnFailureRatio: z.number().nullish(),
  }).nullish(),
  pauseReason: nullableString.optional(),
  revertOf: nullableString.optional(),
  retryOf: nullableString.optional(),
  approval: obj({
    state: z.string(),
    requestedBy: obj({ kind: z.string(), id: z.string(), name: nullableString }),
    expiresAt: z.string(),
    decidedBy: obj({ kind: z.string(), id: z.string(), name: nullableString }).nullable(),
    comment: nullableString,
  }).nullish(),
  resumesAt: nullableString.optional(),
};
/** A plan of `GET /alterations`: its alterations' types and count instead of the alterations. */
export const planSummary = obj({ ...planFields, alterationTypes: z.array(z.string()), alterationCount: z.number() });
export const plan = obj({ ...planFields, alterations: z.array(obj({ type: z.string() })) });

export const job = obj({ id: z.string(), workflowInstanceId: z.string(), status: z.number(), log: z.array(logEntry) });

const page = <T extends z.ZodType>(item: T) => obj({ items: z.array(item), nextCursor: nullableString });
const list = <T extends z.ZodType>(item: T) => obj({ items: z.array(item) });

export const planPage = page(planSummary);
export const jobPage = page(job);
export const planWithJobs = obj({ plan, jobs: z.array(job) });
export const planId = obj({ planId: z.string() });
export const planState = obj({ planId: z.string(), status: z.number() });

export const definition = obj({ id: z.string(), definitionId: z.string(), version: z.number() });
export const definitionList = page(definition);
export const migrationDraft = obj({
  definitionId: z.string(),
  from: z.number(),
  to: z.number(),
  mappings: z.array(obj({ source: z.string(), target: z.string(), reason: z.string() })),
  unmapped: z.array(obj({ activityId: z.string(), type: z.string(), name: nullableString })),
});
export const policy = obj({
  approval: z.enum(['never', 'always', 'above']),
  approvalThreshold: z.number().nullable(),
  approvalTtlSeconds: z.number(),
});

export const instanceSummary = obj({
  id: z.string(),
  definitionId: z.string(),
  version: z.number(),
  correlationId: nullableString,
  status: z.string(),
  subStatus: z.string(),
  incidentCount: z.number(),
  updatedAt: z.string(),
});
export const instancePage = page(instanceSummary);
export const instance = obj({
  id: z.string(),
  definitionId: z.string(),
  version: z.number(),
  status: z.string(),
  subStatus: z.string(),
  variables: z.array(obj({ id: z.string(), typeName: z.string() })),
  incidents: z.array(anyObject),
  bookmarks: z.array(obj({ activityId: z.string(), eventName: z.string() })),
});
export const incidentGroupPage = page(
  obj({
    definitionId: z.string(),
    version: z.number(),
    activityId: z.string(),
    activityType: z.string(),
    message: z.string(),
    count: z.number(),
    sampleInstanceIds: z.array(z.string()),
  }),
);
export const activityCounts = obj({
  definitionId: z.string(),
  version: z.number(),
  items: z.array(
    obj({
      activityId: z.string(),
      type: z.string(),
      name: nullableString,
      waiting: z.number(),
      scheduled: z.number(),
      faulted: z.number(),
    }),
  ),
});
export const instanceChangePage = page(
  obj({
    planId: z.string(),
    jobId: z.string(),
    status: z.number(),
    alterationTypes: z.array(z.string()),
    log: z.array(logEntry),
    completedAt: nullableString,
  }),
);
export const auditEntry = obj({
  seq: z.number(),
  at: z.string(),
  actor: obj({ kind: z.string(), id: nullableString, name: nullableString }),
  action: z.string(),
  target: obj({ kind: nullableString, id: nullableString }),
  outcome: z.number(),
  hash: z.string(),
});
export const auditPage = page(auditEntry);
export const auditVerification = obj({ ok: z.boolean(), checked: z.number(), firstBrokenSeq: z.number().nullable() });

export const started = obj({ workflowInstanceId: z.string() });
export const triggered = obj({ resumedWorkflowInstanceIds: z.array(z.string()) });

export const dryRun = obj({ workflowInstanceIds: z.array(z.string()) });
export const count = obj({ count: z.number() });
export const preview = obj({
  matchedCount: z.number(),
  items: z.array(
    obj({
      workflowInstanceId: z.string(),
      isSuccessful: z.boolean(),
      log: z.array(logEntry),
      changes: z.array(obj({ path: z.string() })),
    }),
  ),
});
export const results = obj({
  results: z.array(
    obj({
      workflowInstanceId: z.string(),
      isSuccessful: z.boolean(),
      workflowHasScheduledWork: z.boolean(),
      log: z.array(logEntry),
    }),
  ),
});

export const connection = obj({ id: z.string(), name: z.string(), connectionType: z.string() });
export const connectionList = list(connection);

export const tokens = obj({ accessToken: z.string(), refreshToken: z.string(), expiresIn: z.number() });
export const apiKey = obj({ id: z.string(), key: z.string() });
export const apiKeyList = list(obj({ id: z.string(), name: z.string() }));
export const user = obj({ id: z.string(), name: z.string(), permissions: z.array(z.string()) });
export const userList = list(obj({ id: z.string(), name: z.string() }));
export const health = obj({ status: z.string() });

/** An event of a plan's stream: `progress` (the status is shown as sent, whatever it is) or `done`. */
export const progressEvent = obj({
  jobCounts,
  instancesPerSecond: z.number(),
  pauseReason: nullableString.optional(),
});
export const doneEvent = plan;

/** The first thing wrong with `value` for `schema` ("/items/0/id: expected string"), or undefined. */
export function mismatch(schema: z.ZodType, value: unknown): string | undefined {
  const result = schema.safeParse(value);
  if (result.success) return undefined;
  const issue = result.error.issues[0]!;
  const where = issue.path.length ? `/${issue.path.join('/')}` : 'the body';
  const message = issue.message.replace(/^Invalid input: /, '');
  return message.endsWith('received undefined') ? `${where} missing` : `${where}: ${message}`;
}
