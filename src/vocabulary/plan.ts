/**
 * The plan's words, in one place: its statuses (integers on the wire, names in requests), why a paused plan is
 * paused, how a completed plan's jobs ended, and the steering its workflow reads. This module imports nothing,
 * so the workflow code (workflows/, replayed in Temporal's sandbox) and the service (src/) use the same words:
 * a status or an outcome added here reaches both.
 */

/** Plan status: integers on the wire, names accepted in requests. */
export const PLAN_STATUS = {
  Pending: 0,
  Generating: 1,
  Dispatching: 2,
  Running: 3,
  Completed: 4,
  Failed: 5,
  Cancelled: 6,
  /** Batches in flight finished, none starts until resumed. Not finished. */
  Paused: 7,
  /** Stored with its jobs, waiting for a second principal's approval; nothing runs. Not finished. */
  AwaitingApproval: 8,
} as const;
export type PlanStatusName = keyof typeof PLAN_STATUS;
export type PlanStatus = (typeof PLAN_STATUS)[PlanStatusName];

/** A status's name (`Completed` for 4); the number itself for one no plan has. */
export const planStatusName = (status: number): string =>
  (Object.entries(PLAN_STATUS).find(([, v]) => v === status)?.[0] as string | undefined) ?? String(status);

/** Completed, Failed or Cancelled: nothing more happens to the plan. (Paused is not finished.) */
export const isFinished = (status: number): boolean =>
  status === PLAN_STATUS.Completed || status === PLAN_STATUS.Failed || status === PLAN_STATUS.Cancelled;

/** The statuses of a plan still to be processed, for SQL: `status = ANY(UNFINISHED_STATUSES)`. */
export const UNFINISHED_STATUSES: readonly PlanStatus[] = [
  PLAN_STATUS.Pending,
  PLAN_STATUS.Generating,
  PLAN_STATUS.Dispatching,
  PLAN_STATUS.Running,
  PLAN_STATUS.Paused,
  PLAN_STATUS.AwaitingApproval,
];

/** Whether a completed job's instance came to match its plan's `verify.expect` in time (stored as 0, 1, 2). */
export const VERIFICATIONS = ['Pending', 'Verified', 'Unverified'] as const;
export type Verification = (typeof VERIFICATIONS)[number];

/**
 * Job status: integers on the wire, names accepted in requests. Skipped: the plan's set was fixed while it waited
 * for approval, and the job's instance no longer matched the plan's filter when its batch ran (left as it was).
 */
export const JOB_STATUS = { Pending: 0, Running: 1, Completed: 2, Failed: 3, Cancelled: 4, Skipped: 5 } as const;
export type JobStatusName = keyof typeof JOB_STATUS;
export type JobStatus = (typeof JOB_STATUS)[JobStatusName];

/** Why a Paused plan is paused: an operator, the canary, too many failures, or its schedule (no window open). */
export const PAUSE_REASONS = ['manual', 'canary', 'failures', 'schedule'] as const;
export type PauseReason = (typeof PAUSE_REASONS)[number];

/**
 * How the jobs of a Completed plan ended. A plan whose jobs failed is Completed all the same (its status says
 * the plan was processed), so the plan view, the workflow's result and the Temporal UI say it here.
 */
export const PLAN_OUTCOMES = ['allSucceeded', 'someFailed', 'allFailed', 'noJobs'] as const;
export type PlanOutcome = (typeof PLAN_OUTCOMES)[number];

/** How the jobs of a Completed plan of `total` jobs, `failed` of them failed, ended. */
export function planOutcome(total: number, failed: number): PlanOutcome {
  if (total === 0) return 'noJobs';
  if (failed === 0) return 'allSucceeded';
  return failed >= total ? 'allFailed' : 'someFailed';
}

/** A plan's rollout controls as stored: each null when not asked for. */
export interface RolloutControls {
  rate?: number | null | undefined;
  canary?: number | null | undefined;
  stopOnFailureRatio?: number | null | undefined;
}

/**
 * What the plan workflow steers by, as the plan row says now (the row is the truth; signals only wake the
 * workflow). `steering` grows with every pause, resume and rollout change: a reading with a lower number is
 * older than one the workflow already has.
 */
export interface PlanControl {
  status: PlanStatus;
  pauseReason: PauseReason | null;
  rollout: RolloutControls | null;
  steering: number;
}

/** A principal as a plan names it (`requestedBy`, `decidedBy`): what a person reads, never a secret. */
export interface PrincipalRef {
  kind: 'user' | 'apiKey';
  id: string;
  name: string;
}

export type ApprovalState = 'Pending' | 'Approved' | 'Rejected' | 'Expired' | 'Withdrawn';

/** A plan's approval, as stored in the plan row and shown in the plan view. */
export interface Approval {
  state: ApprovalState;
  requestedBy: PrincipalRef;
  /** The plan's jobs: the instances it will change once approved (its set is fixed while it waits). */
  matchedCount: number;
  expiresAt: string;
  decidedBy: PrincipalRef | null;
  decidedAt: string | null;
  comment: string | null;
  /**
   * Why the plan was held when its jobs were made, though it needed no approval at submission (the policy
   * holds a change at both); absent for a plan held at submission.
   */
  heldBecause?: string;
}
