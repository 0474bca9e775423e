import type { StepResult } from '../src/engine/executor.js';

/** What `callOutbound` is asked with. */
export interface CallArgs {
  instanceId: string;
  recordId: string;
  tenantKey?: string;
  activityId?: string;
  turnBack?: 'result' | 'wake';
  /** The connection the step's first part resolved: read with the record (workflows since it pass it). */
  connectionName?: string;
  /**
   * Made by the step that started it (`executeInstanceStep`, activities/index.ts): only if the tenant has a place
   * free, or one frees within the short wait every call gets; if not, it answers `askAgainInMs: 0`, counting no
   * turn-back, and the workflow asks for the call as for any other.
   */
  inStep?: boolean;
}

/**
 * The ask for the call a step started (`StepResult.call`), by the step itself (`callInStep`). The instance
 * workflow asks the same, written out there: workflow code imports activity types only.
 */
export function callArgs(
  instanceId: string,
  call: NonNullable<StepResult['call']>,
  turnBack: 'result' | 'wake',
  inStep = false,
): CallArgs {
  return {
    instanceId,
    recordId: call.recordId,
    tenantKey: call.tenantKey,
    activityId: call.activityId,
    turnBack,
    ...(inStep ? { inStep } : {}),
    ...(call.connectionName !== undefined ? { connectionName: call.connectionName } : {}),
  };
}
