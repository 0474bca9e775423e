export { instanceExecution, workAvailable } from './instance-execution.js';
export { alterationPlan } from './alteration-plan.js';
