import type { Alteration, Filter, Rollout, Verify } from '../model.js';
import type { Schedule } from '../schedule.js';
import {
  type Approval,
  type PauseReason,
  type PlanControl,
  PLAN_STATUS,
  type PlanStatus,
  type PrincipalRef,
} from '../../vocabulary/plan.js';

/** The plan table's name, for what reports on tables (the metrics' rows and bytes). */
export const PLAN_TABLE = 'alteration_plans';

/**
 * The plan table's one home: every statement on `alteration_plans` is here, and nowhere else
 * (test/unit/plan-store.test.ts greps for it). This folder is that module: its files split it by who asks. The read models (plans.ts), processing (processing.ts),
 * governance (governance.ts), the Temporal adapter and the metrics ask this module; they hold the rules, this
 * module holds the rows. Each function takes the connection or transaction it runs on.
 */

export interface PlanRow {
  id: string;
  tenant_id: string;
  alterations: Alteration[];
  filter: Filter;
  request_hash: string;
  status: PlanStatus;
  job_total: number | null;
  cancelled_count: number;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  failure: string | null;
  rollout: Rollout | null;
  pause_reason: PauseReason | null;
  revert_of: string | null;
  retry_of: string | null;
  verify: Verify | null;
  steering: number;
  submitted_by: PrincipalRef | null;
  approval: Approval | null;
  schedule: Schedule | null;
  resumes_at: Date | null;
  /** A finished plan whose set was fixed for approval: the instances matching its filter then, not in its set. */
  drift_joined: number | null;
}

/** A plan row without its body (alterations and filter): what a summary reads. */
export type PlanStateRow = Omit<PlanRow, 'alterations' | 'filter'>;

export const PLAN_COLUMNS =
  'id, tenant_id, alterations, filter, request_hash, status, job_total, cancelled_count, created_at, started_at, completed_at, failure, rollout, pause_reason, revert_of, retry_of, verify, steering, submitted_by, approval, schedule, resumes_at, drift_joined';

/**
 * The columns of a plan summary: neither the alterations nor the filter, which may be large, but what Postgres
 * stored beside them when the plan was written (src/db/migrations/015_plan_summaries.sql). Computing the types
 * from `alterations` instead would decompress every body of the page.
 */
export const PLAN_SUMMARY_COLUMNS = `${PLAN_COLUMNS.split(', ')
  .filter((c) => c !== 'alterations' && c !== 'filter')
  .join(', ')}, alteration_types, alteration_count`;

export interface PlanSummaryRow extends PlanStateRow {
  alteration_types: string[];
  alteration_count: number;
}

export const CONTROL_COLUMNS = 'status, pause_reason, rollout, steering';
export type ControlRow = Pick<PlanRow, 'status' | 'pause_reason' | 'rollout' | 'steering'>;
/** The steering a plan row says (no statement). */
export const controlOf = (r: ControlRow): PlanControl => ({
  status: r.status,
  pauseReason: r.pause_reason,
  rollout: r.rollout,
  steering: r.steering,
});

/**
 * Whether a revert plan counts as its plan's one revert: every revert but one held for approval and then rejected,
 * withdrawn or expired, which never ran. The unique index on `revert_of` (migration 024) has the same condition.
 */
export const REVERT_COUNTS = `NOT (status = ${PLAN_STATUS.Cancelled} AND approval ->> 'state' IN ('Rejected', 'Withdrawn', 'Expired'))`;
