/**
 * The task queue of outbound calls (Send HTTP Request), beside the one a workflow runs on: its own worker
 * slots (WORKER_OUTBOUND_CALL_SLOTS), so that a slow endpoint never holds a slot a plan batch needs.
 */
export const callsTaskQueue = (taskQueue: string) => `${taskQueue}-calls`;

/**
 * The task queue of plan batches: a few slots per worker (WORKER_BATCH_SLOTS), filled through Temporal's
 * matching (no eager dispatch), so that a backlog of batches forms there and Task Queue Fairness decides
 * whose batch runs next: tenants in turn, and a small plan's batches weighted ahead of a big one's.
 */
export const batchesTaskQueue = (taskQueue: string) => `${taskQueue}-batches`;
