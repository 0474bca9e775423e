import type { DefinitionVersion } from './definitions.js';
import { successors } from './flowchart.js';
import type { AlterableState } from './instance-state.js';

/**
 * The state transitions of an instance, shared by the step executor and the event trigger. Each changes
 * the state in memory; the caller saves it in the transaction that holds the instance's row lock.
 */

/**
 * Settles the sub-status after a change: executing while work is scheduled or an outbound call is out,
 * suspended on bookmarks, finished when none is left. A faulted or finished instance keeps its state.
 */
export function settle(s: AlterableState, now: Date): void {
  if (s.status === 'Finished' || s.subStatus === 'Faulted') return;
  if (s.scheduled.length > 0) {
    s.subStatus = s.subStatus === 'Pending' ? 'Pending' : 'Executing';
  } else if (s.callsInFlight && s.callsInFlight.length > 0) {
    // Its outcome schedules what follows the call (src/engine/executor.ts, part three), and settles again.
    s.subStatus = 'Executing';
  } else if (s.bookmarks.length > 0) {
    s.subStatus = 'Suspended';
  } else {
    finish(s, now);
  }
}

/** Ends the instance: nothing scheduled, nothing awaited. */
export function finish(s: AlterableState, now: Date): void {
  s.scheduled = [];
  s.bookmarks = [];
  s.status = 'Finished';
  s.subStatus = 'Finished';
  s.finishedAt = now;
}

/** Adds the flowchart successors of an activity's outcome to the schedule, once each. */
export function scheduleSuccessors(
  s: AlterableState,
  def: DefinitionVersion,
  activityId: string,
  outcome: string,
): void {
  for (const next of successors(def.root, activityId, outcome)) {
    if (!s.scheduled.includes(next)) s.scheduled.push(next);
  }
}

export function recordIncident(
  s: AlterableState,
  activityId: string,
  activityType: string,
  message: string,
  now: Date,
): void {
  s.incidents.push({ activityId, activityType, message, timestamp: now.toISOString() });
  s.subStatus = 'Faulted';
}
