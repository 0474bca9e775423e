import type pg from 'pg';
import type { Logger } from '../logger.js';
import { Poller } from '../vocabulary/poller.js';
import type { DefinitionCache } from './definitions.js';
import { RESUME_CHUNK, resumeRecorded } from './events.js';

/** How often an idle drain looks for recorded resumptions. */
const IDLE_MS = 100;
const RETRY_MS = 1_000;

/**
 * Runs the resumptions event triggers recorded (migration 014) on a worker: pass after pass, each one
 * transaction of up to RESUME_CHUNK instances, tenants in turn (src/engine/resumptions.ts). Any number of
 * workers drain at once; each takes rows the others do not hold.
 */
export class ResumptionDrain {
  private readonly poller: Poller;
  private failing = false;

  constructor(private readonly o: { pool: pg.Pool; definitions: DefinitionCache; logger: Logger; chunk?: number }) {
    this.poller = new Poller({
      pass: () => this.pass(),
      idleMs: IDLE_MS,
      retryMs: RETRY_MS,
      onError: (err) => {
        if (!this.failing) this.o.logger.warn({ err }, 'could not run recorded event resumptions; retrying');
        this.failing = true;
      },
    });
  }

  /** One pass: the resumptions it took (tests drain with it). */
  async pass(): Promise<number> {
    const taken = await resumeRecorded(this.o.pool, this.o.definitions, this.o.chunk ?? RESUME_CHUNK);
    if (this.failing) {
      this.failing = false;
      this.o.logger.info('recorded event resumptions run again');
    }
    return taken;
  }

  start(): void {
    this.poller.start();
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }
}
