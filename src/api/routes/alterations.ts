import { mayReadInstances } from '../authorize.js';
import { OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { checkFilterReferences, countInstances, instanceIdPages } from '../../alterations/filter.js';
import { previewPlan, previewShown } from '../../alterations/preview.js';
import {
  FilterSchema,
  JobStatusInput,
  type JobStatus,
  PlanStatusInput,
  RolloutPatchSchema,
} from '../../alterations/model.js';
import { allJobs, getPlan, listJobs, listPlans } from '../../alterations/plans.js';
import {
  exportLines,
  csvHeader,
  JOB_EXPORT_FORMATS,
  JOB_EXPORT_TYPES,
  type JobExportFormat,
} from '../../alterations/job-export.js';
import { retryInstances, runAlterations } from '../../alterations/run.js';
import {
  JobSchema,
  PlanSchema,
  PlanSummarySchema,
  PreviewItemSchema,
  RunResultSchema,
} from '../../alterations/views.js';
import { Alterations, PlanId, PreviewSchema, RetryFailedSchema, SubmitSchema } from '../../alterations/requests.js';
import { ALTERATIONS_EXECUTE, ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import { type AppEnv, callerTenant } from '../context.js';
import {
  cancelPlanCommand,
  checkRunAllowed,
  pausePlanCommand,
  resumePlanCommand,
  retryFailedCommand,
  revertPlanCommand,
  rolloutPlanCommand,
  submitPlanCommand,
} from '../plan-commands.js';
import { openAfter, sealCursor } from '../cursor.js';
import { QueryInt32 } from '../../vocabulary/input.js';
import { BODY_ROUTE_PROBLEMS, jsonBody, jsonContent, PAGING, problems } from '../schemas.js';
import { bodyRoute, PlanParams, PlanStatusAnswer, planCommandRoute } from '../route-shapes.js';
import { secureRoute } from '../secure-route.js';
import { jsonInSlices } from '../../vocabulary/time-slice.js';
import { asWrittenJson, writtenJson } from '../written-json.js';
import { streamPages } from '../streamed-pages.js';

const EXECUTE = ALTERATIONS_EXECUTE;
const VIEW = ALTERATIONS_VIEW;
const TAGS = ['Alterations'];

const RunResponseSchema = z.object({ results: z.array(RunResultSchema) }).openapi('AlterationRunResponse');

const InstanceIds = z.array(z.string().min(1).max(500)).min(1).max(1000);

/** A query parameter given once or repeated (`?x=a&x=b`). */
const repeated = (item: z.ZodString) => z.union([item, z.array(item)]).transform((v) => (Array.isArray(v) ? v : [v]));

const submit = bodyRoute(EXECUTE, 'post', '/alterations/submit', {
  tags: TAGS,
  summary: 'Submit a plan: alterations applied in the background to every instance the filter matches',
  body: SubmitSchema,
  answer: {
    202: jsonContent(
      z.object({ planId: z.string() }),
      'Stored (status 0); processing runs as the workflow alteration-plan-{planId}',
    ),
  },
  conflict: true,
});

const dryRun = secureRoute(EXECUTE, {
  method: 'post',
  path: '/alterations/dry-run',
  tags: TAGS,
  summary: 'The instances a filter selects, by creation time then id (or only their count); creates nothing',
  request: {
    query: z.strictObject({
      countOnly: z.enum(['true', 'false']).optional().openapi({ description: 'true: answer {count} without the ids' }),
    }),
    ...jsonBody(FilterSchema),
  },
  responses: {
    200: jsonContent(
      z.union([z.object({ workflowInstanceIds: z.array(z.string()) }), z.object({ count: z.number().int() })]),
      'The selected instances, or with countOnly=true their count',
    ),
    ...BODY_ROUTE_PROBLEMS,
  },
});

const preview = bodyRoute(EXECUTE, 'post', '/alterations/preview', {
  tags: TAGS,
  summary:
    'What a plan would do to the first instances it matches (dry-run order), computed as plans apply; writes nothing',
  body: PreviewSchema,
  answer: {
    200: jsonContent(
      z.object({ matchedCount: z.number().int(), items: z.array(PreviewItemSchema) }).openapi('AlterationPreview'),
      'How many instances match, and the outcome and changes for the first `limit`',
    ),
  },
});

const readPlan = secureRoute(VIEW, {
  method: 'get',
  path: '/alterations/{planId}',
  tags: TAGS,
  summary: 'A plan with its job counts and jobs (the first 1000; a Link header points to the rest)',
  request: PlanParams,
  responses: {
    200: jsonContent(z.object({ plan: PlanSchema, jobs: z.array(JobSchema) }), 'The plan'),
    ...problems(401, 403, 404),
  },
});

const readJobs = secureRoute(VIEW, {
  method: 'get',
  path: '/alterations/{planId}/jobs',
  tags: TAGS,
  summary: "A page of a plan's jobs, in creation order; or all of them as NDJSON or CSV (`format`)",
  request: {
    ...PlanParams,
    query: z.strictObject({
      status: JobStatusInput.optional(),
      ...PAGING,
      format: z
        .enum(['json', ...JOB_EXPORT_FORMATS])
        .optional()
        .openapi({
          description:
            'json (default): a page. ndjson or csv: every job of the plan (of `status`, if given; `after` and `limit` do not apply), streamed a page at a time, for keeping a record before the retention purges them',
        }),
    }),
  },
  responses: {
    200: {
      description: 'A page of jobs, or every job as NDJSON (one job a line) or CSV',
      content: {
        'application/json': { schema: z.object({ items: z.array(JobSchema), nextCursor: z.string().nullable() }) },
        'application/x-ndjson': { schema: z.string() },
        'text/csv': { schema: z.string() },
      },
    },
    ...problems(400, 401, 403, 404),
  },
});

const listAll = secureRoute(VIEW, {
  method: 'get',
  path: '/alterations',
  tags: TAGS,
  summary:
    "A page of the tenant's plans, newest first, as summaries: without their filters, and with alterationTypes and alterationCount instead of the alterations (read one plan for those)",
  request: {
    query: z.strictObject({
      status: PlanStatusInput.optional(),
      after: PAGING.after,
      limit: QueryInt32.min(1).max(100).default(20),
    }),
  },
  responses: {
    200: jsonContent(
      z.object({ items: z.array(PlanSummarySchema), nextCursor: z.string().nullable() }),
      'A page of plan summaries',
    ),
    ...problems(400, 401, 403),
  },
});

const cancel = planCommandRoute(EXECUTE, 'cancel', {
  tags: TAGS,
  summary: 'Cancel a plan: pending jobs are cancelled, running ones finish, the plan ends Cancelled',
  answer: { 202: jsonContent(PlanStatusAnswer, 'Cancelled') },
});

const pause = planCommandRoute(EXECUTE, 'pause', {
  tags: TAGS,
  summary: 'Pause a plan: batches in flight finish, none starts until it is resumed (status Paused 7)',
  answer: { 202: jsonContent(PlanStatusAnswer, 'Paused') },
});

const resume = planCommandRoute(EXECUTE, 'resume', {
  tags: TAGS,
  summary:
    'Resume a Paused plan where it stopped; outside its maintenance windows a 409 names the next one, unless ignoreSchedule',
  body: z
    .strictObject({
      ignoreSchedule: z.boolean().optional().openapi({
        description: 'true: run now, outside the windows too, to its end (its schedule is dropped)',
      }),
    })
    .openapi('ResumeAlterationPlanRequest'),
  answer: { 202: jsonContent(PlanStatusAnswer, 'Resumed: the status it has now') },
});

const rollout = planCommandRoute(EXECUTE, 'rollout', {
  method: 'patch',
  tags: TAGS,
  summary: "Change a running or paused plan's rate or failure ratio, from its next batch (null removes one)",
  body: RolloutPatchSchema,
  answer: { 200: jsonContent(PlanSchema, 'The plan') },
});

const revert = planCommandRoute(EXECUTE, 'revert', {
  tags: TAGS,
  summary:
    'Revert a finished plan: a new plan restores each instance it changed, unless something changed the instance since',
  body: z
    .strictObject({
      id: PlanId.optional().openapi({ description: 'Client-chosen id of the revert plan (idempotent)' }),
    })
    .openapi('RevertAlterationPlanRequest'),
  answer: { 202: jsonContent(z.object({ planId: z.string() }), 'The revert plan, stored and started') },
});

const retryFailed = planCommandRoute(EXECUTE, 'retry-failed', {
  tags: TAGS,
  summary:
    "Retry what a finished plan did not get done: a new plan with its alterations and rollout over its failed jobs' instances (retryOf names the plan); the approval policy applies",
  body: RetryFailedSchema,
  answer: { 202: jsonContent(z.object({ planId: z.string() }), 'The retry plan, stored and started') },
});

const run = bodyRoute(EXECUTE, 'post', '/alterations/run', {
  tags: TAGS,
  summary:
    "Apply alterations now to explicit instances; one result per distinct id, in request order (a 409 where the tenant's approval policy would hold them as a plan)",
  body: z.strictObject({ alterations: Alterations, workflowInstanceIds: InstanceIds }).openapi('RunAlterationsRequest'),
  answer: { 200: jsonContent(RunResponseSchema, 'One result per distinct instance id') },
  conflict: true,
});

const RetrySchema = z
  .strictObject({
    workflowInstanceIds: InstanceIds,
    activityIds: z.array(z.string().min(1).max(500)).max(1000).nullish(),
  })
  .openapi('RetryRequest');

const retryGet = secureRoute(EXECUTE, {
  method: 'get',
  path: '/alterations/workflows/retry',
  tags: TAGS,
  summary: 'Retry faulted activities (query form: ?workflowInstanceIds=a&workflowInstanceIds=b&activityIds=x)',
  request: {
    query: z.strictObject({
      workflowInstanceIds: repeated(z.string().min(1).max(500)).pipe(InstanceIds),
      activityIds: repeated(z.string().min(1).max(500)).optional(),
    }),
  },
  responses: {
    200: jsonContent(RunResponseSchema, 'One result per distinct instance id'),
    ...problems(400, 401, 403, 409),
  },
});

const retryPost = bodyRoute(EXECUTE, 'post', '/alterations/workflows/retry', {
  tags: TAGS,
  summary: 'Retry faulted activities: each is scheduled again, its incidents cleared, the instance dispatched',
  body: RetrySchema,
  answer: { 200: jsonContent(RunResponseSchema, 'One result per distinct instance id') },
  conflict: true,
});

export function alterationRoutes() {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(submit, async (c) => {
    const { planId } = await submitPlanCommand(c.get('deps'), c.get('principal'), c.req.valid('json'));
    c.header('Location', `/alterations/${encodeURIComponent(planId)}`);
    return c.json({ planId }, 202);
  });

  app.openapi(pause, async (c) => {
    return c.json(await pausePlanCommand(c.get('deps'), c.get('principal'), c.req.valid('param').planId), 202);
  });

  app.openapi(resume, async (c) => {
    const { planId } = c.req.valid('param');
    return c.json(await resumePlanCommand(c.get('deps'), c.get('principal'), planId, c.req.valid('json')), 202);
  });

  app.openapi(rollout, async (c) => {
    const { planId } = c.req.valid('param');
    return c.json(await rolloutPlanCommand(c.get('deps'), c.get('principal'), planId, c.req.valid('json')), 200);
  });

  app.openapi(revert, async (c) => {
    const { planId } = c.req.valid('param');
    const reverted = await revertPlanCommand(c.get('deps'), c.get('principal'), planId, c.req.valid('json').id);
    c.header('Location', `/alterations/${encodeURIComponent(reverted.planId)}`);
    return c.json(reverted, 202);
  });

  app.openapi(retryFailed, async (c) => {
    const { planId } = c.req.valid('param');
    const retry = await retryFailedCommand(c.get('deps'), c.get('principal'), planId, c.req.valid('json'));
    c.header('Location', `/alterations/${encodeURIComponent(retry.planId)}`);
    return c.json(retry, 202);
  });

  app.openapi(dryRun, async (c) => {
    const { pool } = c.get('deps');
    await checkFilterReferences(pool, callerTenant(c), c.req.valid('json'));
    if (c.req.valid('query').countOnly === 'true') {
      return c.json({ count: await countInstances(pool, c.req.valid('json'), callerTenant(c)) }, 200);
    }
    // Streamed: {"workflowInstanceIds":[…]} written a page of ids at a time, so a dry-run of a million ids
    // holds one page in memory, not the whole body. The first page is read before the response starts, so
    // a failing query is still a problem+json answer.
    const pages = instanceIdPages(pool, c.req.valid('json'), callerTenant(c));
    const first = await pages.next();
    c.header('Content-Type', 'application/json');
    c.set('streamed', true);
    let sep = '';
    const answer = streamPages(c, first, pages, 'a streamed dry-run', {
      head: '{"workflowInstanceIds":[',
      page: (p) => {
        const text = sep + p.json;
        sep = ',';
        return text;
      },
      tail: ']}\n',
    });
    return asWrittenJson(answer);
  });

  app.openapi(preview, async (c) => {
    const { pool, definitions } = c.get('deps');
    await checkFilterReferences(pool, callerTenant(c), c.req.valid('json').filter, '/filter');
    const preview = previewShown(
      await previewPlan({ pool, definitions }, callerTenant(c), c.req.valid('json'), c.req.raw.signal),
      mayReadInstances(c),
    );
    // Each item's changes may carry thousands of bookmarks before and after: written in time slices.
    return writtenJson(c, await jsonInSlices(preview, 'items', preview.items));
  });

  app.openapi(readPlan, async (c) => {
    const { planId } = c.req.valid('param');
    const { pool, tokens } = c.get('deps');
    const result = await getPlan(pool, callerTenant(c), planId);
    if (result.moreJobs) {
      c.header(
        'Link',
        `</alterations/${encodeURIComponent(planId)}/jobs?after=${sealCursor(tokens.key, result.moreJobs)}>; rel="next"`,
      );
    }
    // Written in time slices (src/vocabulary/time-slice.ts): up to 1,000 jobs, each with its log.
    return writtenJson(c, await jsonInSlices({ plan: result.plan, jobs: [] }, 'jobs', result.jobs));
  });

  app.openapi(readJobs, async (c) => {
    const { pool, tokens } = c.get('deps');
    const query = c.req.valid('query');
    if (query.format === 'ndjson' || query.format === 'csv') return exportJobs(c, query.format, query.status);
    const after = openAfter(tokens.key, query.after);
    const page = await listJobs(pool, callerTenant(c), c.req.valid('param').planId, { ...query, after });
    return writtenJson(
      c,
      await jsonInSlices({ items: [], nextCursor: sealCursor(tokens.key, page.nextCursor) }, 'items', page.items),
    );
  });

  app.openapi(listAll, async (c) => {
    const { pool, tokens } = c.get('deps');
    const query = c.req.valid('query');
    const after = openAfter(tokens.key, query.after);
    const page = await listPlans(pool, callerTenant(c), { ...query, after });
    return c.json({ ...page, nextCursor: sealCursor(tokens.key, page.nextCursor) }, 200);
  });

  app.openapi(cancel, async (c) => {
    return c.json(await cancelPlanCommand(c.get('deps'), c.get('principal'), c.req.valid('param').planId), 202);
  });

  app.openapi(run, async (c) => {
    const body = c.req.valid('json');
    await checkRunAllowed(c.get('deps'), c.get('principal'), body.workflowInstanceIds);
    const results = await runAlterations(c.get('deps'), callerTenant(c), body.workflowInstanceIds, body.alterations);
    return c.json({ results }, 200);
  });

  app.openapi(retryGet, async (c) => {
    const q = c.req.valid('query');
    if (q.activityIds?.length) await checkRunAllowed(c.get('deps'), c.get('principal'), q.workflowInstanceIds);
    const results = await retryInstances(c.get('deps'), callerTenant(c), q.workflowInstanceIds, q.activityIds);
    return c.json({ results }, 200);
  });

  app.openapi(retryPost, async (c) => {
    const body = c.req.valid('json');
    // Named activities are scheduled whether they faulted or not: a change the policy holds like a run.
    if (body.activityIds?.length) await checkRunAllowed(c.get('deps'), c.get('principal'), body.workflowInstanceIds);
    const results = await retryInstances(
      c.get('deps'),
      callerTenant(c),
      body.workflowInstanceIds,
      body.activityIds ?? undefined,
    );
    return c.json({ results }, 200);
  });
  return app;
}

/**
 * Every job of a plan as NDJSON or CSV, a page at a time (`allJobs`): the plan is read, and its first page, before
 * the answer starts, so an unknown plan is still a 404; a page that fails later breaks the answer off.
 */
async function exportJobs(c: Context<AppEnv>, format: JobExportFormat, status: JobStatus | undefined) {
  const { pool } = c.get('deps');
  const planId = c.req.param('planId')!;
  const pages = allJobs(pool, callerTenant(c), planId, { status });
  const first = await pages.next();
  c.header('Content-Type', JOB_EXPORT_TYPES[format]);
  c.header('Content-Disposition', `attachment; filename="plan-${planId}-jobs.${format}"`);
  c.set('streamed', true);
  const answer = streamPages(c, first, pages, "a plan's job export", {
    head: format === 'csv' ? csvHeader() : '',
    page: (jobs) => exportLines(jobs, format),
    tail: '',
  });
  return asWrittenJson(answer);
}
