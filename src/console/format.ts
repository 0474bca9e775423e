import { JOB_STATUS, LOG_LEVEL, PLAN_STATUS, UNFINISHED_STATUSES } from '../alterations/model.js';

/** A plan's status by the name people read (contract section 11): `Awaiting approval`, `Running`, … */
export const PLAN_STATUS_LABELS: Record<number, string> = {
  ...Object.fromEntries(Object.entries(PLAN_STATUS).map(([name, n]) => [n, name])),
  [PLAN_STATUS.AwaitingApproval]: 'Awaiting approval',
};

export const planStatusLabel = (status: number) => PLAN_STATUS_LABELS[status] ?? `Status ${status}`;

/** Every plan status, in number order: the Plans filter's choices. */
export const PLAN_STATUS_CHOICES = Object.entries(PLAN_STATUS_LABELS)
  .map(([n, label]) => ({ value: Number(n), label }))
  .sort((a, b) => a.value - b.value);

export const JOB_STATUS_LABELS: Record<number, string> = Object.fromEntries(
  Object.entries(JOB_STATUS).map(([name, n]) => [n, name]),
);
export const LOG_LEVEL_LABELS: Record<number, string> = Object.fromEntries(
  Object.entries(LOG_LEVEL).map(([name, n]) => [n, name]),
);

/**
 * Statuses in which each plan action is possible (what the domain accepts; a 409 otherwise). A plan
 * awaiting approval can be cancelled (withdrawn), re-rated, approved or rejected, not paused or resumed. (A
 * plan Paused by its schedule can be paused too, by hand, so that it holds across windows: the plan page
 * shows Pause for it by its pause reason, `PAUSE_ALSO_WHEN`.)
 */
export const ACTION_STATUSES = {
  pause: [PLAN_STATUS.Pending, PLAN_STATUS.Generating, PLAN_STATUS.Dispatching, PLAN_STATUS.Running],
  resume: [PLAN_STATUS.Paused],
  cancel: UNFINISHED_STATUSES,
  rollout: UNFINISHED_STATUSES,
  revert: [PLAN_STATUS.Completed, PLAN_STATUS.Failed, PLAN_STATUS.Cancelled],
  decide: [PLAN_STATUS.AwaitingApproval],
} satisfies Record<string, readonly number[]>;

/** Pause is offered to a Paused plan too when it paused for this reason (a manual pause holds across windows). */
export const PAUSE_ALSO_WHEN = 'schedule';

export const plural = (n: number, one: string, many = `${one}s`) =>
  `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

export const count = (n: number) => n.toLocaleString('en-US');

/** A JSON value as one line of text (strings quoted), for before/after columns and variable values. */
export function jsonText(value: unknown): string {
  if (value === undefined) return '(absent)';
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text;
}
