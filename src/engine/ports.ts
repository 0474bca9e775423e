/**
 * What the domain needs from the world, owned here and implemented by adapters: Temporal implements the
 * dispatcher (src/temporal/dispatch.ts). The clock is src/vocabulary/clock.ts.
 */

/** Hands instances with scheduled work to a worker. */
export interface Dispatcher {
  dispatch(instanceIds: readonly string[]): Promise<void>;
}
