import type pg from 'pg';
import type { Logger } from '../logger.js';
import { Poller } from '../vocabulary/poller.js';
import type { DefinitionCache } from './definitions.js';
import { RESUME_CHUNK, resumeRecorded } from './events.js';

/**
 * Runs the resumptions event triggers recorded (migration 014) on a worker: pass after pass, each one
 * transaction of up to RESUME_CHUNK instances, tenants in turn (src/engine/resumptions.ts). Any number of
 * workers drain at once; each takes rows the others do not hold.
 */
export class ResumptionDrain {
  private readonly poller: Poller;

  constructor(private readonly o: { pool: pg.Pool; definitions: DefinitionCache; logger: Logger; chunk?: number }) {
    this.poller = new Poller({
      pass: () => this.pass(),
      log: o.logger,
      failed: 'could not run recorded event resumptions; retrying',
      recovered: 'recorded event resumptions run again',
    });
  }

  /** One pass: the resumptions it took (tests drain with it). */
  async pass(): Promise<number> {
    const taken = await resumeRecorded(this.o.pool, this.o.definitions, this.o.chunk ?? RESUME_CHUNK);
    this.poller.recover();
    return taken;
  }

  start(): void {
    this.poller.start();
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }
}
