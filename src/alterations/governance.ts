import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { Principal } from '../auth/principal.js';
import type { Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { ConflictError, ForbiddenError } from '../errors.js';
import { PLAN_STATUS, type PlanStatus } from './model.js';
import type { Approval, PrincipalRef } from '../vocabulary/plan.js';
import { scheduleState } from './schedule.js';
import {
  expireApprovalRow,
  type GovernedRow,
  lockScheduled,
  pauseBySchedule,
  readGoverned,
  recordDecision,
  resumeBySchedule,
} from './plan-store/index.js';

/**
 * Plan governance (four-eyes approval and maintenance windows): the tenant's approval policy, who submitted
 * a plan and who decided it, and whether its schedule lets it run now. The plan row holds all of it; the
 * plan workflow waits on durable timers for an approval's expiry and a window's opening, and reads the row.
 */

export type { Approval, ApprovalState, PrincipalRef } from '../vocabulary/plan.js';

export const principalRef = (p: Principal): PrincipalRef => ({
  kind: p.kind === 'user' ? 'user' : 'apiKey',
  id: p.id,
  name: p.name,
});

export interface ApprovalPolicy {
  approval: 'never' | 'always' | 'above';
  approvalThreshold: number | null;
  approvalTtlSeconds: number;
}

export const DEFAULT_POLICY: ApprovalPolicy = {
  approval: 'never',
  approvalThreshold: null,
  approvalTtlSeconds: 604_800,
};

/** The tenant's approval policy (the default when it set none). */
export async function getPolicy(db: Queryable, tenantKey: string): Promise<ApprovalPolicy> {
  const { rows } = await db.query<{ approval: ApprovalPolicy['approval']; threshold: number | null; ttl: number }>(
    `SELECT approval, approval_threshold AS threshold, approval_ttl_seconds AS ttl
       FROM alteration_policies WHERE tenant_id = $1`,
    [tenantKey],
  );
  const r = rows[0];
  return r ? { approval: r.approval, approvalThreshold: r.threshold, approvalTtlSeconds: r.ttl } : DEFAULT_POLICY;
}

/** Sets the tenant's approval policy (validated by the route's schema); answers it. */
export async function putPolicy(
  db: Queryable,
  tenantKey: string,
  policy: ApprovalPolicy,
  by: PrincipalRef,
  now = new Date(),
): Promise<ApprovalPolicy> {
  await db.query(
    `INSERT INTO alteration_policies (tenant_id, approval, approval_threshold, approval_ttl_seconds, updated_at, updated_by)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ON CONFLICT (tenant_id) DO UPDATE SET approval = EXCLUDED.approval, approval_threshold = EXCLUDED.approval_threshold,
       approval_ttl_seconds = EXCLUDED.approval_ttl_seconds, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by`,
    [tenantKey, policy.approval, policy.approvalThreshold, policy.approvalTtlSeconds, now, JSON.stringify(by)],
  );
  return policy;
}

/**
 * Whether a plan needs approval: its body asks for it, or the policy says always, or above a threshold
 * the filter's matches exceed. A submitter cannot opt out of the policy.
 */
export function approvalNeeded(policy: ApprovalPolicy, asked: boolean, matchedCount: number): boolean {
  if (asked || policy.approval === 'always') return true;
  return policy.approval === 'above' && policy.approvalThreshold !== null && matchedCount > policy.approvalThreshold;
}

/** How long the instances changed without approval count against an `above` policy's threshold. */
export const UNAPPROVED_WINDOW_MS = 3_600_000;

/**
 * Whether the tenant's policy holds a change of `count` instances that was not approved: `always`; or `above N`
 * when the change alone, or with the instances the tenant changed without approval in the last hour, passes N
 * (so that splitting a change into many small plans or runs does not get around the policy). Answers why, or
 * null; a change not held is counted (with `planId` for a plan's). Runs in the caller's transaction, which it
 * keeps from overlapping another check of the tenant by locking the tenant's policy row.
 */
export async function holdsUnapproved(
  client: pg.PoolClient,
  tenantKey: string,
  count: number,
  now: Date,
  planId: string | null,
): Promise<{ policy: ApprovalPolicy; reason: string } | null> {
  const { rows } = await client.query<{ approval: ApprovalPolicy['approval']; threshold: number | null; ttl: number }>(
    `SELECT approval, approval_threshold AS threshold, approval_ttl_seconds AS ttl
       FROM alteration_policies WHERE tenant_id = $1 FOR UPDATE`,
    [tenantKey],
  );
  const r = rows[0];
  const policy: ApprovalPolicy = r
    ? { approval: r.approval, approvalThreshold: r.threshold, approvalTtlSeconds: r.ttl }
    : DEFAULT_POLICY;
  if (count === 0 || policy.approval === 'never') return null;
  if (policy.approval === 'always') return { policy, reason: `The tenant's approval policy is always` };
  const threshold = policy.approvalThreshold!;
  if (count > threshold)
    return { policy, reason: `${count} instances match, more than the policy's threshold of ${threshold}` };
  const since = new Date(now.getTime() - UNAPPROVED_WINDOW_MS);
  const { rows: spent } = await client.query<{ n: number }>(
    `WITH old AS (DELETE FROM unapproved_changes WHERE tenant_id = $1 AND at <= $2)
     SELECT coalesce(sum(instances), 0)::int AS n FROM unapproved_changes WHERE tenant_id = $1 AND at > $2`,
    [tenantKey, since],
  );
  const before = spent[0]!.n;
  if (before + count > threshold)
    return {
      policy,
      reason: `${count} instances, with the ${before} the tenant changed without approval in the last hour, are more than the policy's threshold of ${threshold}`,
    };
  await client.query('INSERT INTO unapproved_changes (tenant_id, at, instances, plan_id) VALUES ($1, $2, $3, $4)', [
    tenantKey,
    now,
    count,
    planId,
  ]);
  return null;
}

/** A pending approval of a plan submitted by `by` now. */
export function pendingApproval(policy: ApprovalPolicy, by: PrincipalRef, matchedCount: number, now: Date): Approval {
  return {
    state: 'Pending',
    requestedBy: by,
    matchedCount,
    expiresAt: new Date(now.getTime() + policy.approvalTtlSeconds * 1000).toISOString(),
    decidedBy: null,
    decidedAt: null,
    comment: null,
  };
}

/** What four eyes refuse (the API's words). */
export const SELF_APPROVAL = 'A plan cannot be approved by the principal that submitted it';
export const CREATURE_APPROVAL = 'A plan cannot be approved by a principal that the submitter created';
export const CREATOR_APPROVAL = 'A plan cannot be approved by the principal that created its submitter';
export const SELF_REJECTION =
  'A plan cannot be rejected by the principal that submitted it: its submitter withdraws it by cancelling it';

/** The id the operator's ADMIN_API_KEY has as a principal (src/auth/api-keys.ts `ADMIN_PRINCIPAL_ID`). */
const OPERATOR_KEY_ID = 'admin-api-key';

/**
 * A principal's creation line: itself, the key or user that created it, who created that one, and so on
 * up (every key and user records its creator). The line ends below the operator's bootstrap key
 * (ADMIN_API_KEY, or the key a first start generated): it is nobody's creature, and the keys and users it
 * makes stand for themselves. A creator that no longer exists, or one recorded before creators were, ends it
 * too. Each entry is `kind:id`. One statement, at most 32 steps.
 */
export async function creationLine(db: Queryable, p: Pick<PrincipalRef, 'kind' | 'id'>): Promise<string[]> {
  const { rows } = await db.query<{ kind: string; id: string; bootstrap: boolean }>(
    `WITH RECURSIVE line(kind, id, depth) AS (
       SELECT $1::text, $2::text, 0
       UNION ALL
       SELECT c.created_by ->> 'kind', c.created_by ->> 'id', line.depth + 1
         FROM line
         JOIN LATERAL (SELECT k.created_by FROM api_keys k WHERE line.kind = 'apiKey' AND k.id = line.id
                       UNION ALL
                       SELECT u.created_by FROM users u WHERE line.kind = 'user' AND u.id = line.id) c ON true
        WHERE line.depth < 32 AND c.created_by IS NOT NULL)
     SELECT l.kind, l.id,
            (l.kind = 'apiKey' AND (l.id = $3 OR EXISTS (SELECT 1 FROM api_keys b WHERE b.id = l.id AND b.is_bootstrap))) AS bootstrap
       FROM line l ORDER BY l.depth`,
    [p.kind, p.id, OPERATOR_KEY_ID],
  );
  const line: string[] = [];
  for (const [i, r] of rows.entries()) {
    // The operator's key ends its creatures' lines; it is in a line only as the principal itself.
    if (r.bootstrap && i > 0) break;
    line.push(`${r.kind}:${r.id}`);
  }
  return line;
}

/**
 * Whom a creation line's principal stands for: a key stands for whoever made it (followed through keys that
 * made keys), a user for itself. The first user of the line, or the last key when it holds none.
 */
const ownerOf = (line: readonly string[]): string => line.find((e) => e.startsWith('user:')) ?? line[line.length - 1]!;

/**
 * Four eyes: why `approver` may not decide a plan that `submitter` submitted, or undefined when it may. The
 * two may not be the same principal, nor one person's (a key stands for whoever made it, so a user and the
 * keys they made are one), nor stand on one creation line: a key or user the submitter created (directly,
 * or through keys and users it created) may not approve, and neither may the principal that created the
 * submitter. Principals made by one creator side by side are two principals: whoever may create users is
 * trusted to create them for people, and every creation names its creator (`GET /identity/users`, `GET
 * /identity/api-keys`).
 */
export async function fourEyesRefusal(
  db: Queryable,
  submitter: Pick<PrincipalRef, 'kind' | 'id'>,
  approver: Pick<PrincipalRef, 'kind' | 'id'>,
): Promise<string | undefined> {
  const s = await creationLine(db, submitter);
  const a = await creationLine(db, approver);
  const submitterOwner = ownerOf(s);
  const approverOwner = ownerOf(a);
  if (s[0] === a[0] || submitterOwner === approverOwner) return SELF_APPROVAL;
  // A creature of the submitter, or of whom the submitter stands for (a user and a key made by the one who made
  // the submitting key): the same person twice.
  if (a.includes(s[0]!) || a.includes(submitterOwner)) return CREATURE_APPROVAL;
  if (s.includes(a[0]!) || s.includes(approverOwner)) return CREATOR_APPROVAL;
  return undefined;
}

/** How long an approval waits for a just-submitted plan's jobs (its fixed set) before its 409, and how often it looks. */
const JOBS_WAIT_MS = 5_000;
const JOBS_POLL_MS = 100;

/**
 * Decides a plan awaiting approval. Approved: the plan goes on as if just submitted (Pending; its rollout and
 * schedule apply from here). Rejected: Cancelled, its jobs Cancelled. The submitter's own principal (or a key of its) is
 * refused (403), and anything but a plan AwaitingApproval is a 409. Answers the plan's status now.
 */
export async function decidePlan(
  pool: pg.Pool,
  tenantKey: string,
  planId: string,
  decision: 'Approved' | 'Rejected',
  by: PrincipalRef,
  comment: string | null,
  now = new Date(),
): Promise<PlanStatus> {
  const current = await readGoverned(pool, tenantKey, planId);
  checkDecidable(planId, current, now);
  const submitter = current.approval.requestedBy ?? current.submitted_by;
  const refusal = submitter ? await fourEyesRefusal(pool, submitter, by) : undefined;
  if (refusal)
    throw new ForbiddenError(decision === 'Rejected' && refusal === SELF_APPROVAL ? SELF_REJECTION : refusal);
  // An approval right after the submission waits a moment for the plan's jobs (its workflow makes them at once).
  for (let waited = 0; decision === 'Approved' && waited < JOBS_WAIT_MS; waited += JOBS_POLL_MS) {
    if ((await readGoverned(pool, tenantKey, planId)).job_total !== null) break;
    await sleep(JOBS_POLL_MS);
  }
  return withTransaction(pool, async (client) => {
    const row = await readGoverned(client, tenantKey, planId, true);
    checkDecidable(planId, row, now);
    // What is approved is the set its jobs fixed (contract section 12): none yet (its workflow makes them at once
    // after the submission, under this row's lock), nothing to approve. A rejection needs no set.
    if (decision === 'Approved' && row.job_total === null)
      throw new ConflictError(
        `Plan ${planId} is still fixing its instance set: approve it once its jobs exist (jobCounts.total)`,
      );
    const approval: Approval = {
      ...row.approval,
      state: decision,
      decidedBy: by,
      decidedAt: now.toISOString(),
      comment,
    };
    return recordDecision(client, planId, decision, approval, now);
  });
}

/**
 * A plan may be decided while it awaits approval and its approval has not expired: after `expiresAt` it is
 * a 409 whether or not the expiry timer has run yet (the timer may be late, or its worker down).
 */
function checkDecidable(
  planId: string,
  row: GovernedRow,
  now: Date,
): asserts row is GovernedRow & { approval: Approval } {
  if (row.status !== PLAN_STATUS.AwaitingApproval || !row.approval) {
    throw new ConflictError(`Plan ${planId} is not awaiting approval`);
  }
  if (Date.parse(row.approval.expiresAt) <= now.getTime()) {
    throw new ConflictError(`Plan ${planId} has expired: its approval was due by ${row.approval.expiresAt}`);
  }
}

/**
 * An undecided plan past its `expiresAt` becomes Cancelled with approval state Expired (the plan workflow's
 * durable timer calls this). Answers whether it expired; a decided plan, or one not yet due, is left alone.
 */
export function expireApproval(db: Queryable, planId: string, now = new Date()): Promise<boolean> {
  return expireApprovalRow(db, planId, now);
}

/** What the plan workflow's schedule check answers: may batches start now, and when that changes. */
export interface ScheduleGate {
  open: boolean;
  /** Closed: when the next window opens (ms since the epoch); null: never (no window ahead) or open. */
  resumesAt: number | null;
  /** Open: when the current window closes (ms since the epoch); null: it never closes. */
  closesAt: number | null;
  /** The plan ended meanwhile: nothing more to do. */
  finished: boolean;
}

/**
 * Checks a plan's schedule now and records what it means in the row: outside every window (or before
 * notBefore) a plan that is running is Paused with pauseReason "schedule" and `resumes_at`; inside one, a
 * plan paused by its schedule runs again. A plan paused for another reason (by hand, its canary, its
 * failures) stays paused, whatever the windows say. A plan without a schedule is always open.
 */
export async function checkSchedule(pool: pg.Pool, planId: string, now = new Date()): Promise<ScheduleGate> {
  return withTransaction(pool, async (client) => {
    const row = await lockScheduled(client, planId);
    const finished =
      row.status === PLAN_STATUS.Completed || row.status === PLAN_STATUS.Failed || row.status === PLAN_STATUS.Cancelled;
    const state = scheduleState(row.schedule, now);
    const gate: ScheduleGate = {
      open: state.open,
      resumesAt: state.resumesAt?.getTime() ?? null,
      closesAt: state.closesAt?.getTime() ?? null,
      finished,
    };
    if (finished || row.status === PLAN_STATUS.AwaitingApproval) return gate;
    const pausedBySchedule = row.status === PLAN_STATUS.Paused && row.pause_reason === 'schedule';
    if (!state.open && row.status !== PLAN_STATUS.Paused) await pauseBySchedule(client, planId, state.resumesAt, true);
    else if (!state.open && pausedBySchedule) await pauseBySchedule(client, planId, state.resumesAt, false);
    else if (state.open && pausedBySchedule) await resumeBySchedule(client, planId);
    return gate;
  });
}
