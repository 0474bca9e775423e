import type { ActivityType } from './activity-types.js';
import type { ActivityNode } from './definition-schema.js';
import type { DefinitionVersion } from './definitions.js';
import { nodeIdOf } from './flowchart.js';
import type { StepInput, StepSink } from './handlers/handler.js';
import { type CallRequest, findHandler } from './handlers/index.js';
import { recordedInputs } from './inputs.js';
import type { AlterableState } from './instance-state.js';
import { recordIncident, scheduleSuccessors } from './transitions.js';

/**
 * The core of a step, shared by the two places steps run: the step executor (src/engine/executor.ts: one
 * instance, its record and journal written in the step's transaction) and the pure steps
 * (src/engine/pure-steps.ts: many instances in memory, their records and journal written afterwards with one
 * statement each). The same handlers run the same way in both; only where a step writes differs (`StepSink`).
 */

/** Takes the activity at the head of the schedule off it; an instance that runs one is Executing. */
export function takeHead(s: AlterableState): string | undefined {
  const activityId = s.scheduled.shift();
  if (activityId !== undefined && s.subStatus === 'Pending') s.subStatus = 'Executing';
  return activityId;
}

/** A step's activity record as it starts (Running): the columns both writers store. */
export interface StartedRecord {
  activityId: string;
  nodeId: string;
  activityType: string;
  name: string | null;
  /** The inputs as recorded: a no-log input (a connection) as `****`. */
  inputs: Record<string, unknown>;
}

export function startedRecord(
  def: DefinitionVersion,
  activity: ActivityNode,
  type: ActivityType,
  inputs: Record<string, unknown>,
): StartedRecord {
  return {
    activityId: activity.id,
    nodeId: nodeIdOf(def.root, activity),
    activityType: activity.type,
    name: activity.name ?? null,
    inputs: recordedInputs(type, inputs),
  };
}

export type { StepInput, StepSink } from './handlers/handler.js';

/**
 * Runs the handler of the step's activity (src/engine/handlers/): completing it closes its record and
 * schedules the successors of the outcome; faulting it records an incident and closes the record Faulted,
 * unless `beforeFault` throws to have the step retried instead (a resilience strategy with attempts left);
 * an activity type without a handler faults. Returns the handler's `CallRequest` when the activity calls out.
 */
export async function runHandler(
  step: StepInput,
  sink: StepSink,
  beforeFault?: (message: string) => void,
): Promise<CallRequest | void> {
  const { s, def, activity, now } = step;
  const fault = async (message: string) => {
    beforeFault?.(message);
    recordIncident(s, activity.id, activity.type, message, now);
    await sink.finishRecord('Faulted');
  };
  const handler = findHandler(activity.type);
  if (!handler) return fault(`Activity type ${activity.type} has no executor`);
  return handler.execute({
    ...step,
    complete: async (outcome) => {
      await sink.finishRecord('Completed');
      scheduleSuccessors(s, def, activity.id, outcome);
    },
    fault,
    finishRecord: (status) => sink.finishRecord(status),
    cancelOthers: async () => {
      await sink.cancelOthers();
      s.callsInFlight = [];
    },
    writeJournal: (message) => sink.writeJournal(message),
  });
}
