/**
 * The task queue of outbound calls (Send HTTP Request), beside the one a workflow runs on: its own worker
 * slots (WORKER_OUTBOUND_CALL_SLOTS), so that a slow endpoint never holds a slot a plan batch needs.
 */
export const callsTaskQueue = (taskQueue: string) => `${taskQueue}-calls`;
