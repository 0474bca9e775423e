import type { Client } from '@temporalio/client';
import { NodeBusyError } from '../errors.js';

/** Thrown where a request needs Temporal before it is up: a 503 saying what it waits for. */
export class TemporalStartingError extends NodeBusyError {
  constructor(why: string) {
    super(`Temporal is not up yet: ${why}. Try again shortly; GET /health/ready says when it is.`, 30);
  }
}

/**
 * The service's way to Temporal, which may come up after the API does: on a first start without
 * TEMPORAL_ADDRESS the dev server's binary is built with Go (minutes), and the API, its docs and the stored
 * data are served meanwhile. What can wait does (a submitted plan stays Pending and the worker starts it
 * once Temporal is up; a signal to a plan's workflow is skipped, as the plan row is what the workflow
 * reads); what cannot is a 503 naming what it waits for (`client()`).
 */
export class TemporalLink {
  private connectedClient: Client | undefined;
  private why: string;
  private readonly waiters: ((client: Client) => void)[] = [];

  /** `client`: Temporal is up already; else `why` says what it waits for. */
  constructor(init: { client: Client } | { why: string }) {
    if ('client' in init) {
      this.connectedClient = init.client;
      this.why = '';
    } else this.why = init.why;
  }

  /** Whether Temporal is up. */
  get ready(): boolean {
    return this.connectedClient !== undefined;
  }

  /** What Temporal waits for ('' once it is up). */
  get waitingFor(): string {
    return this.why;
  }

  /** The client, or `TemporalStartingError` (503) while Temporal is not up. */
  client(): Client {
    if (!this.connectedClient) throw new TemporalStartingError(this.why);
    return this.connectedClient;
  }

  /** The client if Temporal is up. */
  current(): Client | undefined {
    return this.connectedClient;
  }

  /** Says what Temporal now waits for (the build's progress, the dev server starting). */
  waiting(why: string): void {
    if (!this.connectedClient) this.why = why;
  }

  /** Temporal is up. */
  connected(client: Client): void {
    this.connectedClient = client;
    this.why = '';
    for (const w of this.waiters.splice(0)) w(client);
  }

  /** Resolves once Temporal is up. */
  whenReady(): Promise<Client> {
    if (this.connectedClient) return Promise.resolve(this.connectedClient);
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}
