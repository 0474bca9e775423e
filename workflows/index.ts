export { instanceExecution, workAvailable } from './instance-execution.js';
