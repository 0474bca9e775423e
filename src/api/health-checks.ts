import type { AppDeps } from './context.js';

/** A dependency's check, as `GET /health` and `GET /health/ready` report it. */
export type Check = 'ok' | 'unavailable';

/** What `GET /health/ready` answers: each check, and `ok` only when every one is. */
export interface Readiness {
  status: Check;
  checks: { postgres: Check; temporal: Check; worker?: Check };
}

/** Resolves false instead of hanging when a dependency does not answer in time. */
export async function probe(check: () => Promise<unknown>, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([
      check().then(
        () => true,
        () => false,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const check = (ok: boolean): Check => (ok ? 'ok' : 'unavailable');

/**
 * Is this process ready for work: Postgres and Temporal answer, and, where the process runs a worker, the
 * worker polls (every one of its Temporal workers is RUNNING: not yet started, stopping, stopped or failed is
 * not ready). The database probe takes no tenant's share of connections, so it answers whatever the tenants'
 * requests hold.
 */
export async function readiness(
  deps: Pick<AppDeps, 'pool' | 'ungatedPool' | 'temporal' | 'workerRunning'>,
): Promise<Readiness> {
  const [pg, tp] = await Promise.all([
    probe(() => (deps.ungatedPool ?? deps.pool).query('SELECT 1')),
    probe(() => deps.temporal.connection.workflowService.getSystemInfo({})),
  ]);
  const checks: Readiness['checks'] = { postgres: check(pg), temporal: check(tp) };
  if (deps.workerRunning) checks.worker = check(deps.workerRunning());
  const ok = Object.values(checks).every((c) => c === 'ok');
  return { status: check(ok), checks };
}
