/**
 * A background loop of passes: each pass does what it finds and says how much; an empty pass waits `idleMs`
 * (or until `wake`), a failed one `retryMs`, and the loop says once that it fails and once that it works again. `stop` waits for the pass in flight. The outbox relay
 * (src/temporal/outbox-relay.ts) and the resumption drain (src/engine/resumption-drain.ts) run on it.
 */
export interface PollerOptions {
  /** One pass: the amount of work it did (0: nothing waiting). */
  pass: () => Promise<number>;
  /** Wait after an empty pass (default 100 ms). */
  idleMs?: number;
  /** Wait after a failed pass (default 1 s). */
  retryMs?: number;
  /** Where the loop says it fails and works again (a pino logger is one). */
  log: { warn: (fields: Record<string, unknown>, message: string) => void; info: (message: string) => void };
  /** Said once when a pass, or a part of one (`fail`), fails after working. */
  failed: string;
  /** Said once when a pass works after failing. */
  recovered: string;
  /** Said instead of `failed` when the pass itself throws (default `failed`). */
  passFailed?: string;
}

export class Poller {
  private failing = false;
  private stopped = false;
  private running: Promise<void> | undefined;
  private waking: (() => void) | undefined;

  constructor(private readonly o: PollerOptions) {}

  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.running;
    this.running = undefined;
  }

  /**
   * A pass, or one of its parts, failed: said once with its error however many fail in a row, so that a lost
   * database or Temporal server is one warning and one recovery in the log, not a line a pass.
   */
  fail(err: unknown, fields: Record<string, unknown> = {}, message = this.o.failed): void {
    if (!this.failing) this.o.log.warn({ err, ...fields }, message);
    this.failing = true;
  }

  /** A pass worked: after failures, said once. */
  recover(): void {
    if (!this.failing) return;
    this.failing = false;
    this.o.log.info(this.o.recovered);
  }

  /** Ends the wait of an idle loop now. */
  wake(): void {
    this.waking?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let done = 0;
      let failed = false;
      try {
        done = await this.o.pass();
      } catch (err) {
        failed = true;
        this.fail(err, {}, this.o.passFailed);
      }
      if (done > 0 || this.stopped) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, failed ? (this.o.retryMs ?? 1_000) : (this.o.idleMs ?? 100));
        this.waking = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.waking = undefined;
    }
  }
}
