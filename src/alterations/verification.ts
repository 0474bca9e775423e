import type { Queryable } from '../db/pool.js';
import { compileFilter } from './filter.js';
import { LOG_LEVEL, type LogEntry, type Verification, VERIFICATIONS, type Verify } from './model.js';
import { readPlanVerify } from './plan-store/index.js';

/**
 * A plan's check of its effect (`verify`, contract section 12): every completed job of a plan with `verify` is
 * Pending until its instance matches `verify.expect` (Verified) or `withinSeconds` have passed since the job
 * completed (Unverified, with a note its log shows). Each check is a few statements per plan over its jobs still
 * Pending (their own partial index, migration 031), never a request or a Temporal round trip per instance. The
 * plan's workflow runs the checks and owns the waits between them (durable timers), so a deadline that passes
 * while every process is down is checked when one is up again.
 */

const CODE: Record<Verification, number> = { Pending: 0, Verified: 1, Unverified: 2 };
/** What a job of a plan with `verify` is written with when it completes: Pending, until a check finds it otherwise. */
export const BORN_PENDING = CODE.Pending;
export const verificationName = (code: number | null): Verification | null =>
  code === null ? null : (VERIFICATIONS[code] ?? null);

export interface VerificationCounts {
  verified: number;
  unverified: number;
  pending: number;
}

/** The verification counts of these plans (those with `verify`), by plan. */
export async function countVerifications(
  db: Queryable,
  planIds: readonly string[],
): Promise<Map<string, VerificationCounts>> {
  if (planIds.length === 0) return new Map();
  const { rows } = await db.query<{ plan_id: string } & VerificationCounts>(
    `SELECT plan_id,
            count(*) FILTER (WHERE verification = ${CODE.Verified})::int AS verified,
            count(*) FILTER (WHERE verification = ${CODE.Unverified})::int AS unverified,
            count(*) FILTER (WHERE verification = ${CODE.Pending})::int AS pending
       FROM alteration_jobs WHERE plan_id = ANY($1::text[]) AND verification IS NOT NULL GROUP BY plan_id`,
    [planIds],
  );
  return new Map(rows.map(({ plan_id, ...counts }) => [plan_id, counts]));
}

/** The log entry of an Unverified job: its note, at the time the check found the time had passed. */
export function unverifiedEntry(note: string, at: Date): LogEntry {
  return { message: note, logLevel: LOG_LEVEL.Warning, timestamp: at.toISOString(), eventName: 'Verification failed' };
}

export interface VerificationCheck {
  /** The plan has `verify`. */
  verifying: boolean;
  /** Jobs still Pending verification after this check. */
  pending: number;
  /** Milliseconds until the earliest Pending job's deadline (null: none Pending). */
  nextDeadlineInMs: number | null;
  /** Jobs this check made Verified and Unverified (for the operator's metrics). */
  newlyVerified?: number;
  newlyUnverified?: number;
  /** Once none is Pending: the plan's jobs Verified and Unverified (absent while some are Pending). */
  verified?: number;
  unverified?: number;
}

/**
 * One check of a plan's effect: its completed jobs (written Pending by their batch) whose instance matches
 * `expect` now become Verified, and those whose time has passed Unverified. Idempotent: a
 * check run twice (a retried activity) finds nothing more to do.
 */
export async function checkVerification(db: Queryable, planId: string, now: Date): Promise<VerificationCheck> {
  const plan = await readPlanVerify(db, planId);
  if (!plan?.verify) return { verifying: false, pending: 0, nextDeadlineInMs: null };
  const verify: Verify = plan.verify;
  // A batch writes each completed job of the plan Pending (BORN_PENDING): a check reads only those still Pending.
  // A submitted `expect` constrains something (checkExpectConstrains); one stored before that rule matches all.
  const expect = compileFilter({ ...verify.expect, emptyFilterSelectsAll: true }, plan.tenant_id);
  const n = expect.params.length;
  const verified = await db.query(
    `UPDATE alteration_jobs j SET verification = ${CODE.Verified}, verified_at = $${n + 2}
       FROM workflow_instances i
      WHERE j.plan_id = $${n + 1} AND j.verification = ${CODE.Pending} AND i.id = j.instance_id AND ${expect.where}`,
    [...expect.params, planId, now],
  );
  // Past its deadline: Unverified, with what the instance is now (and its first incident), or that it is gone.
  const unverified = await db.query(
    `UPDATE alteration_jobs j
        SET verification = ${CODE.Unverified}, verified_at = $3,
            verification_note = format('Not verified within %s s: the instance is %s', $2::int,
              coalesce(i.status || '/' || i.sub_status || coalesce(', ' || (i.incidents -> 0 ->> 'message'), ''),
                       'gone'))
       FROM alteration_jobs k LEFT JOIN workflow_instances i ON i.id = k.instance_id
      WHERE j.plan_id = $1 AND j.verification = ${CODE.Pending}
        AND k.plan_id = j.plan_id AND k.ord = j.ord
        AND j.completed_at + make_interval(secs => $2::int) <= $3`,
    [planId, verify.withinSeconds, now],
  );
  const { rows } = await db.query<{ pending: number; first: Date | null }>(
    `SELECT count(*)::int AS pending, min(completed_at) AS first
       FROM alteration_jobs WHERE plan_id = $1 AND verification = ${CODE.Pending}`,
    [planId],
  );
  const { pending, first } = rows[0]!;
  // The last check says how it ended (one read of the plan's jobs, once).
  const ended = pending === 0 ? (await countVerifications(db, [planId])).get(planId) : undefined;
  return {
    verifying: true,
    pending,
    newlyVerified: verified.rowCount ?? 0,
    newlyUnverified: unverified.rowCount ?? 0,
    ...(pending === 0 ? { verified: ended?.verified ?? 0, unverified: ended?.unverified ?? 0 } : {}),
    nextDeadlineInMs: first ? Math.max(0, first.getTime() + verify.withinSeconds * 1000 - now.getTime()) : null,
  };
}
