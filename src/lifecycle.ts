import type { Logger } from './logger.js';

/** Thrown by `Lifecycle.add` when a stop was requested while the service was still starting. */
/** Where a start registers how each part stops: a `Lifecycle` (src/main.ts), `Stops`, or the service's own list. */
export interface StopRegistry {
  add(name: string, stop: () => Promise<unknown>): void;
}

export class StopRequested extends Error {}

const STOP_DEADLINE_MS = 30_000;

/**
 * What was started, and how each part stops: run once, in reverse order of start (API, worker, Temporal,
 * pools, Postgres), each awaited within a deadline so that one that hangs does not keep the others waiting.
 */
export class Stops {
  private readonly stops: { name: string; stop: () => Promise<unknown> }[] = [];
  private running: Promise<void> | undefined;

  constructor(private readonly logger: Logger) {}

  add(name: string, stop: () => Promise<unknown>): void {
    this.stops.unshift({ name, stop });
  }

  get size(): number {
    return this.stops.length;
  }

  run(): Promise<void> {
    this.running ??= this.runAll();
    return this.running;
  }

  private async runAll(): Promise<void> {
    for (const { name, stop } of this.stops) {
      const outcome = await withDeadline(stop(), STOP_DEADLINE_MS).catch((err: unknown) => {
        this.logger.warn({ err, name }, 'error while stopping');
        return 'failed';
      });
      if (outcome === TIMED_OUT) this.logger.warn({ name }, `not stopped within ${STOP_DEADLINE_MS / 1000} s`);
    }
  }
}

/**
 * The one owner of the process's end. What starts registers how it stops; a signal, a fatal worker
 * error or a failed start asks for the stop, which runs the registered stops (`Stops`), then logs
 * `stopped` and exits. Nothing else calls process.exit.
 */
export class Lifecycle {
  private readonly stops: Stops;
  private requested: { reason: string; exitCode: number } | undefined;
  private running = false;
  private stopping: Promise<void> | undefined;

  constructor(private readonly logger: Logger) {
    this.stops = new Stops(logger);
  }

  /** The exit code of the stop requested so far (0 for a signal), or undefined while none is. */
  get requestedExitCode(): number | undefined {
    return this.requested?.exitCode;
  }

  /** Registers a stop; once a stop was requested, the start unwinds here. */
  add(name: string, stop: () => Promise<unknown>): void {
    this.stops.add(name, stop);
    if (this.requested) throw new StopRequested(this.requested.reason);
  }

  /** The start is complete: a stop requested meanwhile runs now. */
  started(): void {
    this.running = true;
    if (this.requested) void this.stop();
  }

  /** Asks for the stop. While starting, the start unwinds at its next step and then stops. */
  request(reason: string, exitCode: number): void {
    if (this.requested) return;
    this.requested = { reason, exitCode };
    if (this.running) void this.stop();
  }

  /** Runs the stops once and exits with the requested code (1 when none was requested: a failed start). */
  stop(): Promise<void> {
    this.stopping ??= this.runStops();
    return this.stopping;
  }

  private async runStops(): Promise<void> {
    const exitCode = this.requested?.exitCode ?? 1;
    // A start that failed before starting anything (a taken port) has said all there is to say.
    if (!this.requested && this.stops.size === 0) process.exit(exitCode);
    this.logger.info({ reason: this.requested?.reason ?? 'start failed' }, 'shutting down');
    await this.stops.run();
    this.logger.info({ exitCode }, 'stopped');
    process.exit(exitCode);
  }
}

const TIMED_OUT = Symbol('timed out');

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
