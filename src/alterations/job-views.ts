import { JOB_STATUS, type JobStatus, LOG_LEVEL, type LogEntry } from './model.js';
import type { PlanRow } from './plan-store/index.js';
import { unverifiedEntry, verificationName } from './verification.js';
import type { JobView } from './views.js';

/** A job as the read models show it: its row (or, for a job without one, the row its set implies) and its log. */

export interface JobRow {
  plan_id: string;
  ord: number;
  id: string;
  instance_id: string;
  status: JobStatus;
  log: LogEntry[] | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  /** Of a plan with `verify`: 0 Pending, 1 Verified, 2 Unverified (migration 031); null otherwise. */
  verification: number | null;
  verified_at: Date | null;
  verification_note: string | null;
}

export const JOB_COLUMNS =
  'plan_id, ord, id, instance_id, status, log, created_at, started_at, completed_at, verification, verified_at, verification_note';

/** The log of a job whose instance no longer matched its plan's filter when its batch ran (status Skipped). */
export const skippedEntry = (at: Date): LogEntry => ({
  message: "No longer matches the plan's filter",
  logLevel: LOG_LEVEL.Warning,
  timestamp: at.toISOString(),
  eventName: 'Skipped',
});

/**
 * A Completed job stores no log: each of the plan's alterations succeeded at its completion time (a revert
 * job: its instance was restored).
 */
export function jobLog(r: JobRow, plan: Pick<PlanRow, 'alterations' | 'revert_of'>): LogEntry[] {
  const log = resultLog(r, plan);
  // An Unverified job's log ends with why (src/alterations/verification.ts).
  return r.verification_note && r.verified_at ? [...log, unverifiedEntry(r.verification_note, r.verified_at)] : log;
}

function resultLog(r: JobRow, plan: Pick<PlanRow, 'alterations' | 'revert_of'>): LogEntry[] {
  if (r.log) return r.log;
  if (r.status !== JOB_STATUS.Completed || !r.completed_at) return [];
  const timestamp = r.completed_at.toISOString();
  if (plan.revert_of !== null) {
    return [
      {
        message: `Restored to its state before plan ${plan.revert_of}`,
        logLevel: LOG_LEVEL.Information,
        timestamp,
        eventName: 'Alteration reverted',
      },
    ];
  }
  return plan.alterations.map((a) => ({
    message: `${a.type} succeeded`,
    logLevel: LOG_LEVEL.Information,
    timestamp,
    eventName: `Alteration ${a.type} succeeded`,
  }));
}

export function jobView(r: JobRow, plan: Pick<PlanRow, 'alterations' | 'revert_of'>): JobView {
  return {
    id: r.id,
    planId: r.plan_id,
    workflowInstanceId: r.instance_id,
    status: r.status,
    verification: verificationName(r.verification),
    log: jobLog(r, plan),
    createdAt: r.created_at.toISOString(),
    startedAt: r.started_at?.toISOString() ?? null,
    completedAt: r.completed_at?.toISOString() ?? null,
  };
}
