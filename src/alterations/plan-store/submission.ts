import { purgedRevertConflict } from './retention.js';
import type pg from 'pg';
import type { Queryable } from '../../db/pool.js';
import { NotFoundError } from '../../errors.js';
import { type Approval, PLAN_STATUS, type PrincipalRef } from '../../vocabulary/plan.js';
import type { Alteration, Filter, Rollout, Verify } from '../model.js';
import type { Schedule } from '../schedule.js';
import { PLAN_COLUMNS, type PlanRow, REVERT_COUNTS } from './rows.js';

/** Storing plans and reverts (the API's submit and revert). */

export interface NewPlan {
  id: string;
  tenantKey: string;
  alterations: readonly Alteration[];
  filter: Filter;
  requestHash: string;
  createdAt: Date;
  rollout: Rollout | null;
  submittedBy: PrincipalRef | null;
  approval: Approval | null;
  schedule: Schedule | null;
  revertOf?: string | null;
  /** The plan whose failed jobs this one retries. */
  retryOf?: string | null;
  /** How the plan checks its effect. */
  verify?: Verify | null;
}

/** Stores a plan (AwaitingApproval when it carries an approval, else Pending); false when its id is taken. */
export async function insertPlan(db: Queryable, p: NewPlan): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO alteration_plans
       (id, tenant_id, alterations, filter, request_hash, status, created_at, rollout, submitted_by, approval, schedule, revert_of, retry_of, verify)
     SELECT $1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11::jsonb, $12, $13, $14::jsonb
      -- An id names one plan for good: a purged plan's id stays used (its jobs may still lie in their partition).
      WHERE NOT EXISTS (SELECT 1 FROM purged_plans WHERE id = $1)
     ON CONFLICT (id) DO NOTHING`,
    [
      p.id,
      p.tenantKey,
      JSON.stringify(p.alterations),
      JSON.stringify(p.filter),
      p.requestHash,
      p.approval ? PLAN_STATUS.AwaitingApproval : PLAN_STATUS.Pending,
      p.createdAt,
      p.rollout && JSON.stringify(p.rollout),
      p.submittedBy ? JSON.stringify(p.submittedBy) : null,
      p.approval && JSON.stringify(p.approval),
      p.schedule && JSON.stringify(p.schedule),
      p.revertOf ?? null,
      p.retryOf ?? null,
      p.verify ? JSON.stringify(p.verify) : null,
    ],
  );
  return rowCount === 1;
}

/** The tenant and request hash of the plan with this id, whatever its tenant (a resubmitted id is checked by them). */
export async function planIdentity(
  db: Queryable,
  planId: string,
): Promise<{ tenant_id: string; request_hash: string } | undefined> {
  const { rows } = await db.query<{ tenant_id: string; request_hash: string }>(
    'SELECT tenant_id, request_hash FROM alteration_plans WHERE id = $1',
    [planId],
  );
  return rows[0];
}

/**
 * The original of a revert, locked (NO KEY UPDATE) so that two reverts of one plan are decided one after the
 * other, with its reverts: each id and whether it counts as the plan's one revert.
 */
export async function lockRevertOriginal(
  client: pg.PoolClient,
  tenantKey: string,
  planId: string,
): Promise<{ original: PlanRow; reverts: { id: string; counts: boolean }[] }> {
  const { rows } = await client.query<PlanRow>(
    `SELECT ${PLAN_COLUMNS} FROM alteration_plans WHERE id = $1 AND tenant_id = $2 FOR NO KEY UPDATE`,
    [planId, tenantKey],
  );
  const original = rows[0];
  const purged = await purgedRevertConflict(client, tenantKey, planId);
  if (purged) throw purged;
  if (!original) throw new NotFoundError(`Plan ${planId} not found`);
  const existing = await client.query<{ id: string; counts: boolean }>(
    `SELECT id, ${REVERT_COUNTS} AS counts FROM alteration_plans WHERE revert_of = $1`,
    [planId],
  );
  return { original, reverts: existing.rows };
}

/**
 * The plan that reverts `planId` in the tenant, or null (a plan is reverted at most once: a unique index on
 * `revert_of`, migrations 007 and 024). What a plan's page shows as "Reverted by".
 */
export async function revertingPlanId(db: Queryable, tenantKey: string, planId: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM alteration_plans WHERE revert_of = $1 AND tenant_id = $2 AND ${REVERT_COUNTS}`,
    [planId, tenantKey],
  );
  return rows[0]?.id ?? null;
}
