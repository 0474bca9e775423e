import type pg from 'pg';
import type { TemporalLink } from '../temporal/link.js';

/** What the checks reach: Postgres (through no tenant's share) and Temporal; a worker's state where it runs one. */
export interface ProbeDeps {
  pool: pg.Pool;
  ungatedPool?: pg.Pool | undefined;
  temporal: TemporalLink;
  workerRunning?: (() => boolean) | undefined;
}

/** A dependency's check, as `GET /health` and `GET /health/ready` report it. */
export type Check = 'ok' | 'unavailable';

/** What `GET /health/ready` answers: each check, and `ok` only when every one is. */
export interface Readiness {
  status: Check;
  checks: { postgres: Check; temporal: Check; worker?: Check };
  /** Why a check is not ok when the service knows (Temporal's dev server being built, or starting). */
  detail?: string;
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
export async function readiness(deps: ProbeDeps): Promise<Readiness> {
  const client = deps.temporal.current();
  const [pg, tp] = await Promise.all([
    probe(() => (deps.ungatedPool ?? deps.pool).query('SELECT 1')),
    client ? probe(() => client.connection.workflowService.getSystemInfo({})) : Promise.resolve(false),
  ]);
  const checks: Readiness['checks'] = { postgres: check(pg), temporal: check(tp) };
  if (deps.workerRunning) checks.worker = check(deps.workerRunning());
  const ok = Object.values(checks).every((c) => c === 'ok');
  return { status: check(ok), checks, ...(client ? {} : { detail: `Temporal: ${deps.temporal.waitingFor}` }) };
}

/** How old a probe result may be when a health request is answered from it (contract section 9). */
export const PROBE_MAX_AGE_MS = 1_000;

/**
 * The dependencies' checks, shared by every health request of a process: a request is answered from the
 * last result while it is under a second old, and requests that come while a check runs wait for that one
 * check. A flood of `/health/ready` costs one query to Postgres and one call to Temporal a second, and can
 * no longer make the node look unready by queueing its own probes behind each other (an attack run saw 20
 * false 503s).
 */
export class CachedProbes {
  private last: { at: number; result: Readiness } | undefined;
  private running: { at: number; result: Promise<Readiness> } | undefined;

  constructor(
    private readonly deps: ProbeDeps,
    private readonly maxAgeMs = PROBE_MAX_AGE_MS,
  ) {}

  /**
   * What the last check found of Postgres and Temporal, however old, without waiting (a new check starts in the
   * background when it is stale): for a page that says what is down and must not wait on a slow check to say it.
   */
  lastKnown(): Readiness['checks'] | undefined {
    if (!this.last || performance.now() - this.last.at >= this.maxAgeMs) void this.readiness().catch(() => undefined);
    return this.last?.result.checks;
  }

  /** The readiness of this process, at most `maxAgeMs` old (the worker's state is read now: it costs nothing). */
  async readiness(): Promise<Readiness> {
    const now = performance.now();
    let result: Readiness;
    if (this.last && now - this.last.at < this.maxAgeMs) result = this.last.result;
    else {
      if (!this.running) {
        const run = {
          at: now,
          result: readiness({ ...this.deps, workerRunning: undefined }).finally(() => {
            if (this.running === run) this.running = undefined;
          }),
        };
        this.running = run;
      }
      const { at } = this.running;
      result = await this.running.result;
      // Its age counts from when the check began.
      if (!this.last || this.last.at < at) this.last = { at, result };
    }
    if (!this.deps.workerRunning) return result;
    const checks = { ...result.checks, worker: check(this.deps.workerRunning()) };
    const status = check(Object.values(checks).every((c) => c === 'ok'));
    return { status, checks, ...(result.detail ? { detail: result.detail } : {}) };
  }
}
