import { noteAudit } from '../audit/scope.js';
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { INT32_MAX } from '../vocabulary/input.js';
import { ConflictError, ValidationError } from '../errors.js';
import { newId } from '../ids.js';
import type { JobCounts, JobView, PlanSummaryView, PlanView } from './views.js';
import { countVerifications, type VerificationCounts } from './verification.js';
import { JOB_COLUMNS, type JobRow, jobView } from './job-views.js';
import { mapInSlices } from '../vocabulary/time-slice.js';
import type { Approval, PrincipalRef } from './governance.js';
import { type Schedule, scheduleState } from './schedule.js';
import {
  cancelPlanRow,
  changeRolloutRow,
  insertPlan,
  lockRevertOriginal,
  pausePlanRow,
  planIdentity,
  type PlanRow,
  type PlanStateRow,
  readPlan,
  readPlanSummaries,
  resumePlanRow,
  unfinishedPlanCount,
} from './plan-store/index.js';
import {
  type Alteration,
  type Filter,
  JOB_STATUS,
  type JobStatus,
  isFinished,
  planOutcome,
  PLAN_STATUS,
  type PlanStatus,
  type Rollout,
  planStatusName,
  type Verify,
} from './model.js';

export interface SubmitRequest {
  id?: string | undefined;
  alterations: Alteration[];
  filter: Filter;
  rollout?: Rollout | null | undefined;
  /** The submitter asks for review whatever the policy (section 10). */
  approval?: { required: true } | null | undefined;
  /** When the plan may run (section 10): notBefore and weekly windows. */
  schedule?: Schedule | null | undefined;
  /** How the plan checks its effect: each completed job's instance must come to match `expect` in time. */
  verify?: Verify | null | undefined;
}

/** What the API adds to a submission: who submitted it, and the approval it awaits (null: none needed). */
export interface Submission {
  submittedBy?: PrincipalRef | undefined;
  approval?: Approval | null | undefined;
  /** The plan whose failed jobs this one retries (retry-failed). */
  retryOf?: string | undefined;
}

export type { JobCounts, JobView, PlanView } from './views.js';
export type { PlanRow } from './plan-store/index.js';

/** How many instance ids a row of alteration_job_sets holds (src/db/migrations/008_job_sets.sql). */
export const JOB_SET_SIZE = 1000;

/**
 * The jobs of plan $1 with ord in [from, to), whether their row is written or not: the frozen set
 * (`s`, each id `m.instance_id` at `ord`) beside the job row (`j`, null until a batch wrote the job's
 * result). `joins` may add joins on `m.instance_id`. A set holds at most JOB_SET_SIZE ids, so only the
 * sets that start within JOB_SET_SIZE before `from` are read (by the primary key, never detoasting others).
 */
export const jobsInRange = (from: string, to: string, joins = '') =>
  `FROM alteration_job_sets s
   CROSS JOIN LATERAL unnest(s.instance_ids) WITH ORDINALITY AS m(instance_id, k)
   CROSS JOIN LATERAL (SELECT s.first_ord + m.k::int - 1 AS ord) o
   LEFT JOIN alteration_jobs j ON j.plan_id = s.plan_id AND j.ord = o.ord
   ${joins}
  WHERE ${inRange(from, to)}`;

/** `jobsInRange` without the job rows: for a range that has none (see `NO_JOB_WRITTEN`). */
export const setOrdsInRange = (from: string, to: string) =>
  `FROM alteration_job_sets s
   CROSS JOIN LATERAL unnest(s.instance_ids) WITH ORDINALITY AS m(instance_id, k)
   CROSS JOIN LATERAL (SELECT s.first_ord + m.k::int - 1 AS ord) o
  WHERE ${inRange(from, to)}`;

const inRange = (from: string, to: string) =>
  `s.plan_id = $1 AND s.first_ord > ${from} - ${JOB_SET_SIZE} AND s.first_ord < ${to}
    AND o.ord >= ${from} AND o.ord < ${to}`;

/**
 * No job of plan $1 with ord in [from, to) has a row yet: a batch's first attempt (no legacy Pending rows,
 * no earlier attempt), which then reads its range from the set alone instead of looking up every ord.
 */
export const NO_JOB_WRITTEN = (from: string, to: string) =>
  `NOT EXISTS (SELECT 1 FROM alteration_jobs x WHERE x.plan_id = $1 AND x.ord >= ${from} AND x.ord < ${to})`;

/** A job without a result row: Pending (a row written before job sets may say so too). */
export const JOB_UNWRITTEN = `(j.status IS NULL OR j.status = ${JOB_STATUS.Pending})`;

/** JSON with object keys sorted: equal for equal bodies whatever the key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The filter as the hash sees it: absent, `null` and `[]` mean the same (no constraint), as do an empty
 * search term and `emptyFilterSelectsAll: false`, so they hash the same. A filter without such fields
 * keeps the hash it always had.
 */
function meaningfulFilter(filter: Filter): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(filter)) {
    if (value === null || value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    if ((key === 'searchTerm' && value === '') || (key === 'emptyFilterSelectsAll' && value === false)) continue;
    const given = (entry: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== null && v !== undefined));
    out[key] =
      (key === 'activityFilters' || key === 'incidentFilters') && Array.isArray(value)
        ? (value as Record<string, unknown>[]).map(given)
        : key === 'planJobs'
          ? given(value as Record<string, unknown>)
          : value;
  }
  return out;
}

/** The rollout as stored: every control named, null when not asked for; no rollout at all is null. */
export function normalRollout(rollout: Rollout | null | undefined): Rollout | null {
  if (!rollout) return null;
  const r = {
    rate: rollout.rate ?? null,
    canary: rollout.canary ?? null,
    stopOnFailureRatio: rollout.stopOnFailureRatio ?? null,
  };
  return r.rate === null && r.canary === null && r.stopOnFailureRatio === null ? null : r;
}

export function requestHash(
  alterations: readonly Alteration[],
  filter: Filter,
  rollout?: Rollout | null,
  governance: { approval?: { required: true } | null; schedule?: Schedule | null; verify?: Verify | null } = {},
): string {
  // A plan without rollout controls, approval request or schedule keeps the hash it always had.
  const body: Record<string, unknown> = { alterations, filter: meaningfulFilter(filter) };
  const r = normalRollout(rollout);
  if (r) body.rollout = r;
  if (governance.approval) body.approval = governance.approval;
  if (governance.schedule) body.schedule = governance.schedule;
  if (governance.verify)
    body.verify = {
      expect: meaningfulFilter(governance.verify.expect),
      withinSeconds: governance.verify.withinSeconds,
    };
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

/**
 * Stores a plan (status Pending) and returns its id. A client-supplied id makes this idempotent: the same
 * id with the same body returns the stored plan (`created: false`); with another body, or an id used in
 * another tenant, it is a 409 (the message is the same, so nothing about other tenants is revealed).
 */
export async function submitPlan(
  db: Queryable,
  tenantKey: string,
  req: SubmitRequest,
  now = new Date(),
  submission: Submission = {},
): Promise<{ planId: string; created: boolean }> {
  const id = req.id ?? newId();
  noteAudit({ targetId: id });
  const schedule = req.schedule && (req.schedule.notBefore || req.schedule.windows?.length) ? req.schedule : null;
  const verify = req.verify ?? null;
  const hash = requestHash(req.alterations, req.filter, req.rollout, { approval: req.approval, schedule, verify });
  const rollout = normalRollout(req.rollout);
  const approval = submission.approval ?? null;
  const inserted = await insertPlan(db, {
    id,
    tenantKey,
    alterations: req.alterations,
    filter: req.filter,
    requestHash: hash,
    createdAt: now,
    rollout,
    submittedBy: submission.submittedBy ?? null,
    approval,
    schedule,
    retryOf: submission.retryOf ?? null,
    verify,
  });
  if (inserted) return { planId: id, created: true };
  const existing = await planIdentity(db, id);
  if (!existing || existing.tenant_id !== tenantKey || existing.request_hash !== hash) {
    throw new ConflictError(`Plan id ${id} is already used by a different plan`);
  }
  return { planId: id, created: false };
}

/**
 * Job counts from the per-batch counts written with each batch and the plan's own totals: a few rows
 * read, whatever the plan's size. No job is ever observed Running (a batch is one transaction).
 */
async function countJobs(
  db: Queryable,
  plans: readonly Pick<PlanRow, 'id' | 'job_total' | 'cancelled_count' | 'verify'>[],
): Promise<Map<string, Counted>> {
  const counts = new Map<string, Counted>();
  if (plans.length === 0) return counts;
  const { rows } = await db.query<{ plan_id: string; completed: number; failed: number; skipped: number }>(
    `SELECT plan_id, sum(completed)::int AS completed, sum(failed)::int AS failed, sum(skipped)::int AS skipped
       FROM alteration_batch_counts WHERE plan_id = ANY($1::text[]) GROUP BY plan_id`,
    [plans.map((p) => p.id)],
  );
  const done = new Map(rows.map((r) => [r.plan_id, r]));
  const verifications = await countVerifications(
    db,
    plans.filter((p) => p.verify).map((p) => p.id),
  );
  for (const p of plans) {
    const total = p.job_total ?? 0;
    const completed = done.get(p.id)?.completed ?? 0;
    const failed = done.get(p.id)?.failed ?? 0;
    const skipped = done.get(p.id)?.skipped ?? 0;
    const cancelled = p.cancelled_count;
    counts.set(p.id, {
      total,
      pending: total - completed - failed - skipped - cancelled,
      running: 0,
      completed,
      failed,
      cancelled,
      skipped,
      verification: verifications.get(p.id) ?? { verified: 0, unverified: 0, pending: 0 },
    });
  }
  return counts;
}

/** A plan's job counts, with its verification counts beside them (a plan without `verify` ignores those). */
type Counted = JobCounts & { verification: VerificationCounts };

function planView(r: PlanRow, counts: Counted): PlanView {
  const { id, ...rest } = planState(r, counts);
  return { id, alterations: r.alterations, workflowInstanceFilter: r.filter, ...rest };
}

/** What a plan and its summary share: all but the alterations and the filter. */
function planState(
  r: PlanStateRow,
  { verification: v, ...counts }: Counted,
): Omit<PlanView, 'alterations' | 'workflowInstanceFilter'> {
  // With `verify`, a completed job has succeeded only once Verified.
  const notSucceeded = counts.failed + (r.verify ? counts.completed - v.verified : 0);
  return {
    id: r.id,
    status: r.status,
    createdAt: r.created_at.toISOString(),
    startedAt: r.started_at?.toISOString() ?? null,
    completedAt: r.completed_at?.toISOString() ?? null,
    jobCounts: counts,
    failureReason: r.status === PLAN_STATUS.Failed ? r.failure : null,
    rollout: r.rollout ?? { rate: null, canary: null, stopOnFailureRatio: null },
    pauseReason: r.status === PLAN_STATUS.Paused ? (r.pause_reason ?? 'manual') : null,
    revertOf: r.revert_of,
    retryOf: r.retry_of,
    // Skipped jobs were left alone on purpose: the outcome is that of the jobs that ran.
    outcome: r.status === PLAN_STATUS.Completed ? planOutcome(counts.total - counts.skipped, notSucceeded) : null,
    drift: fixedForApproval(r) ? { skipped: counts.skipped, joined: r.drift_joined } : null,
    verification: r.verify ? { expect: r.verify.expect, withinSeconds: r.verify.withinSeconds, ...v } : null,
    approval: r.approval ?? null,
    schedule: r.schedule ?? null,
    resumesAt:
      r.status === PLAN_STATUS.Paused && r.pause_reason === 'schedule' ? (r.resumes_at?.toISOString() ?? null) : null,
  };
}

/** A plan whose set was fixed while it waited for approval (at submission or when its jobs were made): it runs that set. */
const fixedForApproval = (r: Pick<PlanStateRow, 'approval' | 'revert_of'>) =>
  r.approval !== null && r.revert_of === null;

/** The log of a revert job that found its instance changed since the plan it reverts. */
export const revertFailureMessage = (planId: string) => `Instance changed since plan ${planId}; not reverted`;

const planRow = readPlan;

/** Cursors are opaque to clients: base64url of the position they continue after (signed by the API). */
export const encodeCursor = (parts: (string | number)[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** What a position may hold, strictly: a crafted cursor is a 400, never a value SQL chokes on. */
const CURSOR_PARTS = {
  ord: (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= INT32_MAX,
  timestamp: (v: unknown) =>
    typeof v === 'string' && ISO_UTC.test(v) && !Number.isNaN(Date.parse(v)) && new Date(v).toISOString() === v,
  id: (v: unknown) => typeof v === 'string' && /^[\w.:-]{1,100}$/.test(v),
};
export function decodeCursor(cursor: string, shape: (keyof typeof CURSOR_PARTS)[]): (string | number)[] {
  try {
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(parts) && parts.length === shape.length && parts.every((p, i) => CURSOR_PARTS[shape[i]!](p)))
      return parts as (string | number)[];
  } catch {
    // fall through
  }
  throw new ValidationError('The cursor is not valid', [
    { path: '/query/after', message: 'Not a cursor returned by this endpoint' },
  ]);
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

async function jobPage(
  db: Queryable,
  plan: PlanRow,
  opts: { status?: JobStatus | undefined; after?: string | undefined; limit: number },
): Promise<Page<JobView>> {
  const afterOrd = opts.after ? (decodeCursor(opts.after, ['ord'])[0] as number) : -1;
  const rows: JobRow[] = [];
  if (opts.status === JOB_STATUS.Completed || opts.status === JOB_STATUS.Failed || opts.status === JOB_STATUS.Skipped) {
    // Only processed jobs have these statuses, and every processed job has its row.
    const found = await db.query<JobRow>(
      `SELECT ${JOB_COLUMNS} FROM alteration_jobs
        WHERE plan_id = $1 AND ord > $2 AND status = $3 ORDER BY ord LIMIT $4`,
      [plan.id, afterOrd, opts.status, opts.limit + 1],
    );
    rows.push(...found.rows);
  } else if (
    opts.status === undefined ||
    (opts.status === JOB_STATUS.Pending && plan.status !== PLAN_STATUS.Cancelled) ||
    (opts.status === JOB_STATUS.Cancelled && plan.status === PLAN_STATUS.Cancelled)
  ) {
    // (No job is Running when read; no job of a cancelled plan Pending; none Cancelled in another plan.)
    // The set in ord ranges: a page of every job needs exactly limit + 1 ords; a page of Pending or
    // Cancelled jobs reads 50,000 ords at a time until it has them.
    const cancelled = plan.status === PLAN_STATUS.Cancelled;
    const step = opts.status === undefined ? opts.limit + 1 : Math.max(50_000, opts.limit + 1);
    for (let from = afterOrd + 1; rows.length <= opts.limit && from < (plan.job_total ?? 0); from += step) {
      const found = await db.query<JobRow>(
        `SELECT s.plan_id, o.ord, coalesce(j.id, wfa_job_id(s.plan_id, s.created_at, o.ord)) AS id, m.instance_id,
                CASE WHEN ${JOB_UNWRITTEN} THEN $4::smallint ELSE j.status END AS status, j.log, s.created_at,
                j.started_at, CASE WHEN ${JOB_UNWRITTEN} THEN $5::timestamptz ELSE j.completed_at END AS completed_at,
                j.verification, j.verified_at, j.verification_note
           ${jobsInRange('$2', '$3')}
           AND ($6::smallint IS NULL OR CASE WHEN ${JOB_UNWRITTEN} THEN $4::smallint ELSE j.status END = $6)
          ORDER BY o.ord LIMIT $7`,
        [
          plan.id,
          from,
          from + step,
          cancelled ? JOB_STATUS.Cancelled : JOB_STATUS.Pending,
          cancelled ? plan.completed_at : null,
          opts.status ?? null,
          opts.limit + 1 - rows.length,
        ],
      );
      rows.push(...found.rows);
    }
  }
  const more = rows.length > opts.limit;
  const page = more ? rows.slice(0, opts.limit) : rows;
  return {
    // In time slices: a completed job's log is one line per alteration (up to 100), 100,000 for a page.
    items: await mapInSlices(page, (r) => jobView(r, plan)),
    nextCursor: more ? encodeCursor([page[page.length - 1]!.ord]) : null,
  };
}

/** The jobs of a plan in creation order, after a cursor, optionally of one status. */
export async function listJobs(
  db: Queryable,
  tenantKey: string,
  planId: string,
  opts: { status?: JobStatus | undefined; after?: string | undefined; limit: number },
): Promise<Page<JobView>> {
  return jobPage(db, await planRow(db, tenantKey, planId), opts);
}

/**
 * Every job of a plan (of one status, if given), a page of `pageSize` at a time, each page read on a connection
 * of its own that goes back to the pool before the page is handed on: an export of any size holds one page in
 * memory and no connection while its client reads.
 */
export async function* allJobs(
  db: Queryable,
  tenantKey: string,
  planId: string,
  opts: { status?: JobStatus | undefined; pageSize?: number },
): AsyncGenerator<JobView[]> {
  const plan = await planRow(db, tenantKey, planId);
  let after: string | undefined;
  for (;;) {
    const page = await jobPage(db, plan, { status: opts.status, after, limit: opts.pageSize ?? 1000 });
    if (page.items.length) yield page.items;
    if (!page.nextCursor) return;
    after = page.nextCursor;
  }
}

/** How many jobs the plan read returns inline; the paged jobs endpoint reads the rest. */
export const INLINE_JOBS = 1000;

/** A plan with its job counts and its first jobs (all of them up to INLINE_JOBS). */
export async function getPlan(
  db: Queryable,
  tenantKey: string,
  planId: string,
): Promise<{ plan: PlanView; jobs: JobView[]; moreJobs: string | null }> {
  const row = await planRow(db, tenantKey, planId);
  // One after the other: an API request holds at most one connection at a time (its tenant's share).
  const counts = await countJobs(db, [row]);
  const jobs = await jobPage(db, row, { limit: INLINE_JOBS });
  return { plan: planView(row, counts.get(planId)!), jobs: jobs.items, moreJobs: jobs.nextCursor };
}

/** A plan with its job counts, without jobs: what a progress stream reads again and again (two small queries). */
export async function getPlanView(db: Queryable, tenantKey: string, planId: string): Promise<PlanView> {
  const row = await planRow(db, tenantKey, planId);
  const counts = await countJobs(db, [row]);
  return planView(row, counts.get(planId)!);
}

/**
 * The tenant's plans, newest first, as summaries: each plan without its filter and with its alterations
 * replaced by their distinct types (in order of first use) and their count, so that a page stays small
 * (a page of 100 is a few tens of kilobytes) whatever the plans hold.
 */
export async function listPlans(
  db: Queryable,
  tenantKey: string,
  opts: { status?: PlanStatus | undefined; after?: string | undefined; limit: number },
): Promise<Page<PlanSummaryView>> {
  const after = opts.after ? (decodeCursor(opts.after, ['timestamp', 'id']) as [string, string]) : undefined;
  const rows = await readPlanSummaries(db, tenantKey, { status: opts.status, after, limit: opts.limit });
  const more = rows.length > opts.limit;
  const page = more ? rows.slice(0, opts.limit) : rows;
  const counts = await countJobs(db, page);
  const last = page[page.length - 1];
  return {
    items: page.map((r) => {
      const { id, ...rest } = planState(r, counts.get(r.id)!);
      return { id, alterationTypes: r.alteration_types, alterationCount: r.alteration_count, ...rest };
    }),
    nextCursor: more && last ? encodeCursor([last.created_at.toISOString(), last.id]) : null,
  };
}

/**
 * Cancels a plan: pending jobs become Cancelled and the plan Cancelled. Batches in flight hold a share
 * lock on the plan row, so this waits for them to commit; no job runs after it returns. A finished plan is
 * a 409.
 */
export async function cancelPlan(
  pool: pg.Pool,
  tenantKey: string,
  planId: string,
  now = new Date(),
  withdrawnBy?: PrincipalRef,
): Promise<void> {
  await withTransaction(pool, (client) => cancelPlanRow(client, tenantKey, planId, now, withdrawnBy));
}

/**
 * Work that may have a task queued in Temporal: unfinished plans and instances being executed (Pending,
 * Executing). A suspended or faulted instance waits on nothing Temporal holds.
 */
export async function workInFlight(db: Queryable): Promise<number> {
  const plans = await unfinishedPlanCount(db);
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM workflow_instances
                                     WHERE status = 'Running' AND sub_status IN ('Pending', 'Executing') LIMIT 1000) x`,
  );
  return plans + rows[0]!.n;
}

const statusName = planStatusName;

/**
 * Pauses a plan still to be processed: batches in flight finish (this waits for them: each holds a share
 * lock on the plan row), none starts after. Pausing a Paused plan changes nothing. A finished plan is a 409.
 */
export async function pausePlan(db: Queryable, tenantKey: string, planId: string): Promise<void> {
  if (await pausePlanRow(db, tenantKey, planId)) return;
  const { status } = await planRow(db, tenantKey, planId);
  if (status !== PLAN_STATUS.Paused) throw new ConflictError(`Plan ${planId} is already ${statusName(status)}`);
}

/**
 * The advice of a resume refused outside the plan's windows, in words of no one client's syntax: the console's
 * checkbox says "Resume ignoring the schedule", the API's body and the console's form name the field
 * `ignoreSchedule`, and the CLI puts its command in their place (src/cli/commands/plan-steering.ts).
 */
const RESUME_ADVICE = 'Resume it ignoring the schedule (ignoreSchedule) to run it now, its schedule dropped.';

/**
 * Resumes a Paused plan; answers its status now (Running, or Pending when it paused before its jobs
 * existed). Anything but a Paused plan is a 409.
 */
export async function resumePlan(
  db: Queryable,
  tenantKey: string,
  planId: string,
  opts: { ignoreSchedule?: boolean | undefined } = {},
  now = new Date(),
): Promise<PlanStatus> {
  // Outside every window a resume is refused, naming the next window's start, unless it drops the schedule.
  const found = await planRow(db, tenantKey, planId);
  if (found.status === PLAN_STATUS.Paused && found.schedule && !opts.ignoreSchedule) {
    const state = scheduleState(found.schedule, now);
    if (!state.open) {
      throw new ConflictError(
        `Plan ${planId} is outside its maintenance windows: ${
          state.resumesAt ? `the next one opens at ${state.resumesAt.toISOString()}` : 'no window opens again'
        }. ${RESUME_ADVICE}`,
      );
    }
  }
  const resumed = await resumePlanRow(db, tenantKey, planId, opts.ignoreSchedule === true);
  if (resumed !== undefined) return resumed;
  const { status } = await planRow(db, tenantKey, planId);
  throw new ConflictError(`Plan ${planId} is not Paused (it is ${statusName(status)})`);
}

/** Changes the rate or failure ratio of a plan still to be processed (null removes one); a finished plan is a 409. */
export async function changeRollout(
  db: Queryable,
  tenantKey: string,
  planId: string,
  patch: Pick<Rollout, 'rate' | 'stopOnFailureRatio'>,
): Promise<PlanView> {
  const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
  const changed = await changeRolloutRow(db, tenantKey, planId, changes);
  const row = changed ?? (await planRow(db, tenantKey, planId));
  if (!changed) throw new ConflictError(`Plan ${planId} is already ${statusName(row.status)}`);
  const counts = await countJobs(db, [row]);
  return planView(row, counts.get(planId)!);
}

/**
 * Stores the plan that reverts a finished plan: its jobs (made when it runs) restore each instance a
 * Completed job of the original changed, unless something wrote the instance since. 409 while the original
 * is not finished, or when it was reverted already (naming that plan; the same id again is idempotent). A
 * revert rejected, withdrawn or expired while held for approval does not count: the plan can be reverted again.
 */
export async function submitRevert(
  pool: pg.Pool,
  tenantKey: string,
  planId: string,
  id: string | undefined,
  now = new Date(),
  submission: Submission = {},
): Promise<{ planId: string; original: PlanRow }> {
  return withTransaction(pool, async (client) => {
    const { original, reverts } = await lockRevertOriginal(client, tenantKey, planId);
    // Its reverts: the same id again is the same revert, whatever became of it; one that counts (not rejected,
    // withdrawn or expired while held for approval) is the plan's one revert.
    if (id !== undefined && reverts.some((r) => r.id === id)) return { planId: id, original };
    const revert = reverts.find((r) => r.counts);
    if (revert) throw new ConflictError(`Plan ${planId} was already reverted by plan ${revert.id}`);
    if (!isFinished(original.status))
      throw new ConflictError(
        `Plan ${planId} is ${statusName(original.status)}: only a Completed, Failed or Cancelled plan can be reverted`,
      );
    const newPlanId = id ?? newId();
    // A revert is a bulk change like any plan: its reverter recorded, and held for approval where the
    // tenant's policy holds it (src/api/plan-commands.ts `revertPlanCommand`).
    const inserted = await insertPlan(client, {
      id: newPlanId,
      tenantKey,
      alterations: [],
      filter: original.filter,
      requestHash: createHash('sha256').update(`revert:${planId}`).digest('hex'),
      createdAt: now,
      rollout: null,
      submittedBy: submission.submittedBy ?? null,
      approval: submission.approval ?? null,
      schedule: null,
      revertOf: planId,
      // It inherits `verify` (contract section 12): its restores are checked against the same expectation.
      verify: original.verify ?? null,
    });
    if (!inserted) throw new ConflictError(`Plan id ${newPlanId} is already used by a different plan`);
    return { planId: newPlanId, original };
  });
}
