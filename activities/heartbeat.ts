import { Context } from '@temporalio/activity';

/**
 * Heartbeats while `fn` runs, so that the workflow's short heartbeat timeout notices a worker that died
 * mid-activity within seconds, while a slow but live activity (waiting on row locks) is left alone. The
 * first heartbeat comes after 2 s: the timeout runs from the activity's start, and most activities (a
 * batch takes about half a second) end before it, saving the server a heartbeat write per activity.
 */
export async function withHeartbeat<T>(fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  // A local activity has no heartbeat (its workflow task's timeout watches it).
  if (ctx.info.isLocal) return fn();
  const timer = setInterval(() => ctx.heartbeat(), 2_000);
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
