import type { Queryable } from '../../db/pool.js';
import { type Approval, JOB_STATUS, PLAN_STATUS, type PlanStatus, UNFINISHED_STATUSES } from '../../vocabulary/plan.js';
import type { Alteration, Filter, Verify } from '../model.js';
import { planNotFound } from './retention.js';
import { PLAN_COLUMNS, PLAN_SUMMARY_COLUMNS, type PlanRow, type PlanSummaryRow } from './rows.js';

/** Reading plans: the read models', the Temporal adapter's and the metrics' questions. */

/** A plan of the tenant; 404 otherwise (another tenant's plan is as unknown as none). */
export async function readPlan(db: Queryable, tenantKey: string, planId: string): Promise<PlanRow> {
  const { rows } = await db.query<PlanRow>(
    `SELECT ${PLAN_COLUMNS} FROM alteration_plans WHERE id = $1 AND tenant_id = $2`,
    [planId, tenantKey],
  );
  if (!rows[0]) throw await planNotFound(db, tenantKey, planId);
  return rows[0];
}

/** The tenant's plans, newest first, after a position (created_at, id), optionally of one status; limit + 1 read. */
export async function readPlanSummaries(
  db: Queryable,
  tenantKey: string,
  opts: { status?: PlanStatus | undefined; after?: [string, string] | undefined; limit: number },
): Promise<PlanSummaryRow[]> {
  const { rows } = await db.query<PlanSummaryRow>(
    `SELECT ${PLAN_SUMMARY_COLUMNS} FROM alteration_plans
      WHERE tenant_id = $1 AND ($2::smallint IS NULL OR status = $2)
        AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::text))
      ORDER BY created_at DESC, id DESC LIMIT $5`,
    [tenantKey, opts.status ?? null, opts.after?.[0] ?? null, opts.after?.[1] ?? null, opts.limit + 1],
  );
  return rows;
}

/** What a plan's workflow is started with, read back from its row (a swept plan starts as the API started it). */
export async function readPlanStart(db: Queryable, planId: string) {
  const { rows } = await db.query<{
    tenant_id: string;
    alterations: Alteration[];
    filter: Filter;
    revert_of: string | null;
    awaiting: Approval | null;
    scheduled: boolean;
    verify: boolean;
  }>(
    `SELECT tenant_id, alterations, filter, revert_of, schedule IS NOT NULL AS scheduled, verify IS NOT NULL AS verify,
            CASE WHEN status = ${PLAN_STATUS.AwaitingApproval} AND approval ->> 'state' = 'Pending' THEN approval END AS awaiting
       FROM alteration_plans WHERE id = $1`,
    [planId],
  );
  return rows[0];
}

/** Plans stored but not yet started (an API stopped between storing and starting one), paused before they began too. */
export async function pendingPlanIds(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM alteration_plans WHERE status IN ($1, $3) OR (status = $2 AND started_at IS NULL) ORDER BY created_at',
    [PLAN_STATUS.Pending, PLAN_STATUS.Paused, PLAN_STATUS.AwaitingApproval],
  );
  return rows.map((r) => r.id);
}

/** Unfinished plans (whatever their tenant): work that may have a task queued in Temporal. */
export async function unfinishedPlanCount(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM alteration_plans WHERE status = ANY($1::smallint[])',
    [UNFINISHED_STATUSES],
  );
  return rows[0]!.n;
}

/**
 * Whether a plan is starting, making its jobs or running its batches as fast as it can (Pending for a moment,
 * Generating, Dispatching or Running, with no rate): while one is, the outbox relay yields Temporal and the cores
 * to it (src/temporal/outbox-relay.ts), so that a plan's effect does not queue behind instances still being told to
 * Temporal. One index read.
 */
export async function plansInFullFlight(db: Queryable): Promise<boolean> {
  // A plan just submitted (Pending, for its first half minute) counts too: its workflow's start and first tasks
  // are round trips to Temporal as well.
  const { rows } = await db.query<{ busy: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM alteration_plans
                     WHERE (status = ANY($1::smallint[]) OR (status = $2 AND created_at > now() - interval '30 seconds'))
                       AND (rollout IS NULL OR rollout ->> 'rate' IS NULL)) AS busy`,
    [[PLAN_STATUS.Generating, PLAN_STATUS.Dispatching, PLAN_STATUS.Running], PLAN_STATUS.Pending],
  );
  return rows[0]!.busy;
}

/**
 * Whether a plan of another tenant than `planId`'s is starting (Generating, or Dispatching), started in the last
 * `withinMs` and after this one: a batch may step aside for it (src/alterations/step-aside.ts).
 */
export async function othersStarting(
  db: Queryable,
  planId: string,
  withinMs: number,
): Promise<'generating' | 'dispatching' | null> {
  const { rows } = await db.query<{ generating: boolean | null; dispatching: boolean | null }>(
    `SELECT bool_or(p.status = $3) AS generating, bool_or(p.status = $4) AS dispatching
       FROM alteration_plans p, (SELECT tenant_id, started_at FROM alteration_plans WHERE id = $1) AS mine
      WHERE p.status IN ($3, $4) AND p.tenant_id <> mine.tenant_id
        AND p.started_at > greatest(now() - $2 * interval '1 millisecond', coalesce(mine.started_at, '-infinity'))
        AND p.started_at <= now()`,
    [planId, withinMs, PLAN_STATUS.Generating, PLAN_STATUS.Dispatching],
  );
  const r = rows[0];
  return r?.generating ? 'generating' : r?.dispatching ? 'dispatching' : null;
}

/** Plans awaiting approval, and plans paused by their schedule, database-wide (the metrics' gauges). */
export async function governedPlanCounts(db: Queryable): Promise<{ awaiting: number; scheduled: number }> {
  const { rows } = await db.query<{ awaiting: number; scheduled: number }>(
    `SELECT count(*) FILTER (WHERE status = $1)::float8 AS awaiting,
            count(*) FILTER (WHERE status = $2 AND pause_reason = 'schedule')::float8 AS scheduled
       FROM alteration_plans WHERE status = ANY(ARRAY[$1, $2]::smallint[])`,
    [PLAN_STATUS.AwaitingApproval, PLAN_STATUS.Paused],
  );
  return rows[0] ?? { awaiting: 0, scheduled: 0 };
}

/** Whether the tenant has a plan of this id (a filter's `planJobs` names one). */
export async function tenantHasPlan(db: Queryable, tenantKey: string, planId: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM alteration_plans WHERE id = $1 AND tenant_id = $2', [
    planId,
    tenantKey,
  ]);
  return rows.length > 0;
}

/**
 * SQL for the status of a job of plan `planParam` that has no row yet: Cancelled once its plan is, else Pending
 * (a filter's `planJobs` reads jobs this way; src/db/migrations/008_job_sets.sql).
 */
export const unwrittenJobStatusSql = (planParam: string) =>
  `(SELECT CASE WHEN p.status = ${PLAN_STATUS.Cancelled} THEN ${JOB_STATUS.Cancelled} ELSE ${JOB_STATUS.Pending} END
      FROM alteration_plans p WHERE p.id = ${planParam})`;

/** The tenant's plans of these ids, with what a job's log is derived from (an instance's changes list them). */
export async function readPlanAlterations(
  db: Queryable,
  tenantKey: string,
  planIds: readonly string[],
): Promise<Map<string, { alterations: Alteration[]; revert_of: string | null }>> {
  const { rows } = await db.query<{ id: string; alterations: Alteration[]; revert_of: string | null }>(
    'SELECT id, alterations, revert_of FROM alteration_plans WHERE id = ANY($1::text[]) AND tenant_id = $2',
    [planIds, tenantKey],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/** A plan's tenant and `verify` (its checks read them). */
export async function readPlanVerify(
  db: Queryable,
  planId: string,
): Promise<{ tenant_id: string; verify: Verify | null } | undefined> {
  const { rows } = await db.query<{ tenant_id: string; verify: Verify | null }>(
    'SELECT tenant_id, verify FROM alteration_plans WHERE id = $1',
    [planId],
  );
  return rows[0];
}
