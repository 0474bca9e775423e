import type { ConnectionInput } from '../../connections/resolve.js';
import type { ActivityNode } from '../definition-schema.js';
import type { DefinitionVersion } from '../definitions.js';
import type { AlterableState } from '../instance-state.js';

/** The step being run: the instance (changed in memory), its activity and the activity's evaluated inputs. */
export interface StepInput {
  /** The locked instance; handlers change it in memory, the executor saves it. */
  s: AlterableState;
  def: DefinitionVersion;
  activity: ActivityNode;
  /** The activity's inputs, evaluated against the instance's variables. */
  inputs: Record<string, unknown>;
  /** The activity's connection input, resolved in the instance's tenant (when it has one). */
  connection: ConnectionInput | undefined;
  now: Date;
}

/** Where a step writes: its own record (already started), the instance's other records, its journal. */
export interface StepSink {
  /** Closes the activity record without scheduling anything. */
  finishRecord(status: 'Completed' | 'Faulted'): Promise<unknown>;
  /**
   * Marks the instance's other Running records Canceled (the waits of other branches, a call still out): what
   * an activity that ends the instance discards.
   */
  cancelOthers(): Promise<unknown>;
  /** Appends a line to the instance's journal, as this activity's. */
  writeJournal(message: string): Promise<unknown>;
}

/** What a handler sees of the step running its activity, inside the step's transaction. */
export interface StepContext extends StepInput, StepSink {
  /** Completes the activity record and schedules the successors of `outcome`. */
  complete(outcome: string): Promise<void>;
  /** Faults the activity: retried under its resilience strategy while attempts remain, else an incident. */
  fault(message: string): Promise<void>;
}

/** An outbound call a handler asks for: made after the step's transaction committed, holding nothing. */
export interface CallRequest {
  kind: 'call';
  connectionName: string;
  configuration: Record<string, unknown>;
  method: string;
  path: string;
  body: unknown;
  /** The variable the response status goes into, if any. */
  resultVariable: string | undefined;
}

/**
 * How one activity type runs. `execute` does the activity's work within the step's transaction; an
 * activity that calls out returns a `CallRequest` instead, and the executor makes the call between two
 * transactions (src/engine/executor.ts).
 */
export interface ActivityHandler {
  typeName: string;
  execute(ctx: StepContext): Promise<void | CallRequest>;
}
