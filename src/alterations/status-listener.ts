import pg from 'pg';
import type { PostgresConnection } from '../db/postgres-connection.js';
import type { Logger } from '../logger.js';

/** The channel migration 010 notifies on each change of a plan's status (payload: the plan id). */
const CHANNEL = 'wfa_plan_status';
const RECONNECT_MS = 1_000;

/** A plan's status changes, as they commit, for one reader (see `PlanStatusListener.watch`). */
export interface PlanStatusWatch {
  /**
   * Resolves when the plan's status changed since the last call returned (at once if it already has), or
   * after `ms`: the caller reads the plan again either way.
   */
  wait(ms: number): Promise<void>;
  close(): void;
}

/**
 * One LISTEN connection per API node, shared by every event stream it serves: a stream wakes when its
 * plan's status changes (a pause, a resume, the end) instead of at its next poll, whichever node or
 * worker made the change. Without the connection (lost, not yet open) streams only poll: a reconnect
 * wakes them all, since a change may have gone by unheard.
 */
export class PlanStatusListener {
  private client: pg.Client | undefined;
  private readonly watches = new Map<string, Set<Waker>>();
  private readonly dead = new WeakSet<pg.Client>();
  private closed = false;
  private down = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    /** DATABASE_URL as the pools read it (src/db/postgres-connection.ts): the same TLS. */
    private readonly connection: PostgresConnection,
    private readonly logger: Logger,
  ) {}

  /** Opens the connection; a failure is logged and retried in the background (streams poll meanwhile). */
  async start(): Promise<void> {
    await this.open();
  }

  watch(planId: string): PlanStatusWatch {
    const waker = new Waker();
    let set = this.watches.get(planId);
    if (!set) this.watches.set(planId, (set = new Set()));
    set.add(waker);
    return {
      wait: (ms) => waker.wait(ms),
      close: () => {
        waker.wake();
        set.delete(waker);
        if (set.size === 0 && this.watches.get(planId) === set) this.watches.delete(planId);
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async open(): Promise<void> {
    if (this.closed) return;
    // Keep-alive probes notice a connection a network dropped silently (no error, no end, no notifications).
    const client = new pg.Client({
      connectionString: this.connection.connectionString,
      ssl: this.connection.ssl,
      ...(this.connection.sslnegotiation ? { sslnegotiation: this.connection.sslnegotiation } : {}),
      application_name: 'wfa-plan-status',
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      connectionTimeoutMillis: 10_000,
    });
    client.on('notification', (n) => {
      if (n.channel !== CHANNEL || !n.payload) return;
      for (const waker of this.watches.get(n.payload) ?? []) waker.wake();
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      this.lost(client, err);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    if (this.down) this.logger.info('plan status listener is back');
    this.down = false;
    // Changes made while no connection listened went unheard: every stream reads its plan again.
    for (const set of this.watches.values()) for (const waker of set) waker.wake();
  }

  private lost(client: pg.Client, err?: unknown): void {
    // 'error' and 'end' may both come for one connection: the first one counts.
    if (this.dead.has(client)) return;
    this.dead.add(client);
    if (this.client === client) this.client = undefined;
    client.end().catch(() => undefined);
    if (this.closed || this.retry !== undefined) return;
    // Once per outage, not once per attempt (one a second).
    if (!this.down)
      this.logger.warn(
        { err: err instanceof Error ? err.message : undefined },
        'plan status listener has no connection; event streams poll until it is back',
      );
    this.down = true;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.open();
    }, RECONNECT_MS);
    this.retry.unref();
  }
}

/** A flag set by a notification and a wait that returns when it is set or its time is up. */
class Waker {
  private woken = false;
  private resolve: (() => void) | undefined;

  wake(): void {
    this.woken = true;
    this.resolve?.();
  }

  wait(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.resolve = undefined;
        this.woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.resolve = done;
    });
  }
}
