export { callPlaceFreed, instanceExecution, workAvailable } from './instance-execution.js';
export { alterationPlan, planChangedSignal } from './alteration-plan.js';
