/**
 * A background loop of passes: each pass does what it finds and says how much; an empty pass waits `idleMs`
 * (or until `wake`), a failed one `retryMs`. `stop` waits for the pass in flight. The outbox relay
 * (src/temporal/outbox-relay.ts) and the resumption drain (src/engine/resumption-drain.ts) run on it.
 */
export interface PollerOptions {
  /** One pass: the amount of work it did (0: nothing waiting). */
  pass: () => Promise<number>;
  idleMs: number;
  retryMs: number;
  /** A pass threw; the loop goes on after `retryMs`. */
  onError: (err: unknown) => void;
}

export class Poller {
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
        this.o.onError(err);
      }
      if (done > 0 || this.stopped) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, failed ? this.o.retryMs : this.o.idleMs);
        this.waking = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.waking = undefined;
    }
  }
}
