/**
 * What the domain needs from the world, owned here and implemented by adapters: Temporal implements the
 * dispatcher (src/temporal/dispatch.ts). The clock is src/vocabulary/clock.ts.
 */

/** Hands instances with scheduled work to a worker. */
export interface Dispatcher {
  /** `tenantKey`: the instances' tenant (their work is that tenant's share of the workers). */
  dispatch(tenantKey: string, instanceIds: readonly string[]): Promise<void>;
}
