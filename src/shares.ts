/**
 * Per-tenant shares of what tenants share on one node (contract section 8, "Tenant shares"): a count of what
 * each tenant holds against its share, in process. Every node and worker keeps its own; the limits are per
 * node, as the settings say.
 */

/**
 * What a tenant holds of a resource it can be refused (event streams, outbound calls): a share per tenant, a
 * limit overall. A caller at its tenant's share can also wait a little for a place (`take`), in a short
 * first-come queue per tenant, on one of the `maxWaiting` seats all tenants share: a free seat is anyone's, and a
 * tenant with fewer than `perTenant` callers waiting takes one back from the tenant furthest past that, if any.
 */
export class TenantCounter {
  private readonly held = new Map<string, number>();
  private all = 0;
  /** Callers waiting for a place their tenant gives back, first come first served (`take`). */
  private readonly waiting = new Map<string, ((taken: boolean) => void)[]>();
  private waiters = 0;
  /** Told when one of a tenant's places is given back (`toPool`: no caller waiting here took it): `PlaceWaiters`. */
  private freedListener: ((tenant: string, toPool: boolean) => void) | undefined;

  /**
   * `maxWaiting`: callers waiting at once, all tenants together (a tenant alone may take them all; `perTenant` is
   * how many a tenant can take back from others, `take`); a waiter holds whatever its caller holds while it waits
   * (an activity slot), so this bounds that too.
   */
  constructor(
    readonly perTenant: number,
    readonly overall: number,
    readonly maxWaiting = 0,
  ) {}

  /** Takes one for `tenant`, or says whose limit refuses it. */
  tryTake(tenant: string): 'taken' | 'tenant' | 'overall' {
    const mine = this.held.get(tenant) ?? 0;
    if (mine >= this.perTenant) return 'tenant';
    if (this.all >= this.overall) return 'overall';
    this.held.set(tenant, mine + 1);
    this.all++;
    return 'taken';
  }

  /**
   * `tryTake`, and when only the tenant's own share refuses it, a wait of at most `waitMs` for a place one of
   * the tenant's holders gives back: the first in the tenant's queue gets it. No wait when no seat is to be had
   * (`seatFor`) or the limit overall refuses: refused at once. A waiter past its tenant's share can also be refused
   * before `waitMs`, when a tenant under its own share takes its seat back.
   */
  async take(tenant: string, waitMs: number): Promise<'taken' | 'tenant' | 'overall'> {
    const now = this.tryTake(tenant);
    if (now !== 'tenant') return now;
    const queue = this.waiting.get(tenant) ?? [];
    if (waitMs <= 0 || !this.seatFor(tenant, queue.length)) return 'tenant';
    this.waiting.set(tenant, queue);
    this.waiters++;
    const taken = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => turn(false), waitMs);
      const turn = (given: boolean) => {
        clearTimeout(timer);
        const i = queue.indexOf(turn);
        if (i >= 0) queue.splice(i, 1);
        if (queue.length === 0 && this.waiting.get(tenant) === queue) this.waiting.delete(tenant);
        this.waiters--;
        resolve(given);
      };
      queue.push(turn);
    });
    return taken ? 'taken' : 'tenant';
  }

  /**
   * Whether a caller of `tenant`, which has `waitingNow` callers waiting, gets a seat to wait on. A free seat is
   * anyone's: a lone tenant's burst waits on every seat rather than being turned back while seats stand empty (to an
   * endpoint that answers at once, a place frees within milliseconds, and a turn-back costs its workflow a wake, two
   * workflow tasks and an activity; bench/README.md). With every seat taken, a tenant under its share (`perTenant`)
   * takes the seat of the caller that came last of the tenant most past its share, who is refused as it would have
   * been had it come now: a tenant's share of the seats is never held by another's burst.
   */
  private seatFor(tenant: string, waitingNow: number): boolean {
    if (this.waiters < this.maxWaiting) return true;
    if (waitingNow >= this.perTenant) return false;
    let borrower: ((taken: boolean) => void)[] | undefined;
    for (const [other, queue] of this.waiting)
      if (other !== tenant && queue.length > this.perTenant && queue.length > (borrower?.length ?? 0)) borrower = queue;
    const last = borrower?.[borrower.length - 1];
    if (!last) return false;
    last(false);
    return true;
  }

  /** How many places `tenant` could take now (under its share and under the limit overall); without one, in all. */
  free(tenant?: string): number {
    const overall = Math.max(0, this.overall - this.all);
    return tenant === undefined
      ? overall
      : Math.max(0, Math.min(this.perTenant - (this.held.get(tenant) ?? 0), overall));
  }

  /**
   * `listener(tenant, toPool)` whenever one of `tenant`'s places is given back: to the pool (`toPool`), or to the
   * first caller waiting here for it.
   */
  onFreed(listener: (tenant: string, toPool: boolean) => void): void {
    this.freedListener = listener;
  }

  /** What all tenants hold now (the operator's metrics read it; it names no tenant). */
  get total(): number {
    return this.all;
  }

  /** Callers waiting for a place now (`take`), all tenants. */
  get queued(): number {
    return this.waiters;
  }

  /** Gives one back: to the tenant's first waiter, if one waits (it holds it from then on), else to the pool. */
  give(tenant: string): void {
    const next = this.waiting.get(tenant)?.[0];
    if (next) {
      next(true);
      this.freedListener?.(tenant, false);
      return;
    }
    const mine = this.held.get(tenant) ?? 0;
    if (mine <= 1) this.held.delete(tenant);
    else this.held.set(tenant, mine - 1);
    this.all = Math.max(0, this.all - 1);
    this.freedListener?.(tenant, true);
  }
}

/**
 * The workflows waiting outside this worker for a place of a `TenantCounter`: those whose outbound call it turned
 * back (over their tenant's share, or its limit overall). A place given back here wakes (`wake`, a signal to its
 * workflow) the first of its tenant's waiters not woken yet, in the order they came (else, a place that went back
 * to the pool, the first of another tenant with room); a waiter keeps its place in line when it is turned back
 * again. Without this, waiting calls asked again on timers: 55 calls behind an endpoint that hangs came back about 7
 * times a second, each a timer, two workflow tasks and an activity task on the Temporal server every tenant shares
 * (bench/README.md), and a call asked again up to its timer after a place freed.
 *
 * In memory: a worker that stops forgets its waiters, and each one's own timer (`forMs` of `add`) brings it back;
 * an entry lasts no longer than that timer. A wake whose workflow is gone (`wake` answers false) drops its entry and
 * wakes the next. A waiter woken whose call then went to another worker, or found the place taken, is woken again by
 * the sweep: every second, as many of a tenant's waiters as it has places free here (and no more in all than the
 * limit overall leaves), those never woken first, then those woken `rewakeMs` (10 s) ago or more and not turned
 * back since.
 */
export class PlaceWaiters {
  /** Per tenant, the waiting workflows in the order they came: when their own timer brings them back, when woken. */
  private readonly lines = new Map<string, Map<string, { until: number; wokenAt?: number }>>();
  /** When each tenant's line last had a waiter woken for a place a caller inside the worker took. */
  private readonly handedOn = new Map<string, number>();
  private sweeper: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly counter: TenantCounter,
    /** Signals the workflow; resolves false when it is gone (finished, cancelled), true otherwise. */
    private readonly wake: (workflowId: string) => Promise<boolean>,
    private readonly now: () => number = Date.now,
    private readonly sweepMs = 1_000,
    /**
     * How long after its wake a waiter that has not been turned back again (its call went to another worker, its
     * activity waited in Temporal's queue, the signal was lost) may be woken again by the sweep.
     */
    private readonly rewakeMs = 10_000,
  ) {
    counter.onFreed((tenant, toPool) => this.freed(tenant, toPool));
  }

  /** `workflowId` waits for a place of `tenant`; its own timer brings it back after `forMs` whatever happens. */
  add(tenant: string, workflowId: string, forMs: number): void {
    let line = this.lines.get(tenant);
    if (!line) this.lines.set(tenant, (line = new Map()));
    // Set on a key already there keeps its place in the line; asked again, it may be woken again.
    line.set(workflowId, { until: this.now() + forMs });
    this.sweeper ??= setInterval(() => this.sweep(), this.sweepMs);
    this.sweeper.unref?.();
  }

  /** `workflowId`'s call took a place: it waits no more. */
  remove(tenant: string, workflowId: string): void {
    const line = this.lines.get(tenant);
    if (!line) return;
    line.delete(workflowId);
    this.tidy(tenant, line);
  }

  /** Workflows waiting now, all tenants. */
  get size(): number {
    let n = 0;
    for (const line of this.lines.values()) n += line.size;
    return n;
  }

  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /**
   * A place of `tenant` was given back: its first in line not woken yet is woken. When a caller waiting inside the
   * worker took the place, at most one a sweep interval is woken so (to wait there in its turn: new calls that keep
   * coming cannot hold the line back until its timers, and a backlog that keeps the worker's short queue full
   * does not turn a woken call back with every place). A place that went to the pool with no one of its tenant in
   * line may go to another tenant's.
   */
  private freed(tenant: string, toPool: boolean): void {
    if (!toPool) {
      const now = this.now();
      if (now - (this.handedOn.get(tenant) ?? Number.NEGATIVE_INFINITY) < this.sweepMs) return;
      if (this.wakeOne(tenant, false)) this.handedOn.set(tenant, now);
      return;
    }
    if (this.wakeOne(tenant, false)) return;
    // A place counts against the limit overall too: a waiter of another tenant under its share may take it.
    for (const other of this.lines.keys())
      if (other !== tenant && this.counter.free(other) > 0 && this.wakeOne(other, false)) return;
  }

  /**
   * Wakes `tenant`'s first waiter never woken, or (`again`) else its first woken `rewakeMs` ago or more; forgets
   * those whose own timer is due.
   */
  private wakeOne(tenant: string, again: boolean): boolean {
    const line = this.lines.get(tenant);
    if (!line) return false;
    const now = this.now();
    let chosen: [string, { until: number; wokenAt?: number }] | undefined;
    for (const entry of line) {
      const [workflowId, w] = entry;
      if (w.until <= now) {
        line.delete(workflowId);
        continue;
      }
      if (w.wokenAt === undefined) {
        chosen = entry;
        break;
      }
      if (again && !chosen && now - w.wokenAt >= this.rewakeMs) chosen = entry;
    }
    if (!chosen) {
      this.tidy(tenant, line);
      return false;
    }
    const [workflowId, w] = chosen;
    w.wokenAt = now;
    void this.wake(workflowId).then((alive) => {
      if (alive || line.get(workflowId) !== w) return;
      // Gone: its place in line goes to the next.
      this.remove(tenant, workflowId);
      if (this.counter.free(tenant) > 0) this.wakeOne(tenant, false);
    });
    return true;
  }

  /** A tenant no one waits for any more leaves; with none left, the sweep stops. */
  private tidy(tenant: string, line: Map<string, unknown>): void {
    if (line.size > 0) return;
    this.lines.delete(tenant);
    this.handedOn.delete(tenant);
    if (this.lines.size === 0) this.stop();
  }

  private sweep(): void {
    let budget = this.counter.free();
    for (const tenant of [...this.lines.keys()]) {
      // As many as the tenant has places free, and no more in all than the limit overall leaves free.
      for (let free = this.counter.free(tenant); free > 0 && budget > 0; free--, budget--)
        if (!this.wakeOne(tenant, true)) break;
      const line = this.lines.get(tenant);
      if (!line) continue;
      const now = this.now();
      for (const [workflowId, w] of line) if (w.until <= now) line.delete(workflowId);
      this.tidy(tenant, line);
    }
  }
}

/** Thrown by `TenantGate.acquire` when the tenant's turn did not come within the time allowed. */
export class ShareTimeoutError extends Error {
  override name = 'ShareTimeoutError';
}

/** A release that gives a place back once (a second call does nothing), told when the place was taken. */
function releaseOnce(giveBack: (takenAt: number) => void): () => void {
  const taken = performance.now();
  let released = false;
  return () => {
    if (released) return;
    released = true;
    giveBack(taken);
  };
}

/** A waiter in a tenant's first-come queue: takes its place if it may now, and says whether it did. */
type Turn = () => boolean;

/**
 * Waits in `tenant`'s first-come queue of `queues` until a turn called by its owner takes a place (`take` answers
 * the release, or undefined while the tenant may not go yet), `timeoutMs` passes (ShareTimeoutError) or `signal`
 * aborts (its reason). A waiter that leaves gives up its spot in the queue.
 */
function waitTurn(
  queues: Map<string, Turn[]>,
  tenant: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  take: () => (() => void) | undefined,
): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const queue = queues.get(tenant) ?? [];
    queues.set(tenant, queue);
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      const i = queue.indexOf(turn);
      if (i >= 0) queue.splice(i, 1);
      if (queue.length === 0 && queues.get(tenant) === queue) queues.delete(tenant);
    };
    const turn: Turn = () => {
      const release = take();
      if (!release) return false;
      cleanup();
      resolve(release);
      return true;
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new ShareTimeoutError(`no turn within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => {
      cleanup();
      reject(signal?.reason instanceof Error ? signal.reason : new ShareTimeoutError('abandoned'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    queue.push(turn);
  });
}

/**
 * A semaphore per tenant with a first-come queue: a tenant holds at most `perTenant` at once; its further
 * callers wait their turn (or time out) while other tenants' callers go on.
 */
export class TenantGate {
  private readonly held = new Map<string, number>();
  private readonly waiting = new Map<string, Turn[]>();

  /**
   * `minHoldMs`: a place is given back no sooner than this after it was taken, so that `perTenant` places
   * bound the rate too (at most perTenant × 1000 / minHoldMs a second): what keeps a flood of requests that
   * each cost a millisecond (`/health/live` from 64 connections: 1,000 a second, the node's whole core) to a
   * share of the node.
   */
  constructor(
    readonly perTenant: number,
    readonly minHoldMs = 0,
  ) {}

  /** Resolves with the release function once the tenant is under its share; rejects after `timeoutMs`. */
  acquire(tenant: string, timeoutMs: number, signal?: AbortSignal): Promise<() => void> {
    if ((this.held.get(tenant) ?? 0) < this.perTenant && !this.waiting.get(tenant)?.length) {
      this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
      return Promise.resolve(this.releaser(tenant));
    }
    // A waiter's turn always takes the place: the gate lets the first waiter in only when one is free.
    return waitTurn(this.waiting, tenant, timeoutMs, signal, () => {
      this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
      return this.releaser(tenant);
    });
  }

  /**
   * The release of a place just taken: once (a second call does nothing), and no sooner than `minHoldMs`
   * after it was taken. The place goes to the tenant's next waiter on the event loop's next turn, not at
   * once: a waiter handed its turn in the same microtask runs there, and one whose work is synchronous
   * (`/health/live`) released to the next in turn, so a queue of 60 flood requests ran as one chain that
   * no other request's I/O could interrupt (seen: another tenant's requests 50x slower). Until the waiter
   * takes it, the place stays its own: a newcomer queues behind it.
   */
  private releaser(tenant: string): () => void {
    return releaseOnce((taken) => {
      const early = this.minHoldMs - (performance.now() - taken);
      if (early > 0) setTimeout(() => this.giveBack(tenant), early).unref();
      else this.giveBack(tenant);
    });
  }

  private giveBack(tenant: string): void {
    const mine = (this.held.get(tenant) ?? 1) - 1;
    if (mine <= 0) this.held.delete(tenant);
    else this.held.set(tenant, mine);
    if (this.waiting.get(tenant)?.length) setImmediate(() => this.admitNext(tenant));
  }

  /** The tenant's first waiter takes a free place, if any (a waiter that left meanwhile has no place to take). */
  private admitNext(tenant: string): void {
    if ((this.held.get(tenant) ?? 0) < this.perTenant) this.waiting.get(tenant)?.[0]?.();
  }
}

/**
 * How busy this process's event loop has been lately: its utilization (the share of time it ran callbacks
 * rather than waiting for I/O), sampled every `everyMs` and smoothed over the last few samples.
 */
export class EventLoopLoad {
  private last = performance.eventLoopUtilization();
  private utilization = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(everyMs = 50) {
    this.timer = setInterval(() => {
      const now = performance.eventLoopUtilization();
      const sample = performance.eventLoopUtilization(now, this.last).utilization;
      this.last = now;
      // About the last 150 ms: quick to see a flood begin, and not fooled by one long callback.
      this.utilization = this.utilization * 0.5 + sample * 0.5;
    }, everyMs);
    this.timer.unref();
  }

  /** The smoothed utilization, 0…1. */
  get value(): number {
    return this.utilization;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * Requests in flight per tenant on an API node (TENANT_API_REQUESTS), shared by time as well as by count:
 * while the event loop is busy (utilization over `busyAbove`) and another tenant has been active within
 * the last second, each tenant has at most one request in flight, and one whose requests queue rests after
 * each as long as it took; otherwise up to `perTenant`. A tenant with none in flight is always let in. Waiting requests queue per tenant, first come first served, and are
 * let in on the loop's next turn after a release, or within `recheckMs` once the loop is no longer busy.
 *
 * Why one: measured on 2 cores, tenant C reading 1,000 instances a page 32 at a time, tenant B's median
 * read was 68–88 ms with C's 4 in flight, 10–17 ms with 2, and 4.6–5.2 ms with 1 (3.4–4.4 ms alone), while
 * C's own throughput fell by a fifth: requests that queue on the loop and in Postgres at once are what
 * slow everyone else, not one tenant's steady stream. And a tenant whose requests queue rests after each
 * one as long as it took, while contended: one in flight still kept the loop busy all the time (B at
 * 1.9–2.4x beside C, 1.6–1.9x beside 64 parallel cheap reads); resting, B stayed at 1.2–1.4x and 0.8–1.1x
 * (bench/README.md, `npm run bench:noisy`).
 */
export class RequestScheduler {
  private readonly held = new Map<string, number>();
  private readonly waiting = new Map<string, Turn[]>();
  private readonly seen = new Map<string, number>();
  /** A backlogged tenant's next turn, no sooner (while contended): its last request's length after it ended. */
  private readonly rested = new Map<string, number>();
  private recheck: NodeJS.Timeout | undefined;

  constructor(
    readonly perTenant: number,
    private readonly load: { readonly value: number },
    private readonly busyAbove = 0.5,
    private readonly recheckMs = 10,
    private readonly activeMs = 1_000,
  ) {}

  /** How many requests `tenant` may have in flight now. */
  limitFor(tenant: string, now = performance.now()): number {
    if (this.load.value <= this.busyAbove) return this.perTenant;
    for (const [other, at] of this.seen) {
      if (other !== tenant && now - at < this.activeMs) return 1;
    }
    return this.perTenant;
  }

  /** Resolves with the release function once the tenant may go; rejects after `timeoutMs`. */
  acquire(tenant: string, timeoutMs: number, signal?: AbortSignal): Promise<() => void> {
    const now = performance.now();
    this.seen.set(tenant, now);
    if (this.seen.size > 10_000) this.forget(now);
    const mine = this.held.get(tenant) ?? 0;
    if (!this.waiting.get(tenant)?.length && (mine === 0 || mine < this.limitFor(tenant, now))) {
      this.held.set(tenant, mine + 1);
      return Promise.resolve(this.releaser(tenant));
    }
    const waited = waitTurn(this.waiting, tenant, timeoutMs, signal, () => {
      const held = this.held.get(tenant) ?? 0;
      const now = performance.now();
      const limit = this.limitFor(tenant, now);
      if (held > 0 && held >= limit) return undefined;
      // A tenant whose requests queue, while the loop is contended, runs at most half the time: after a
      // request it rests as long as the request took, so that a tenant that is not queueing finds the
      // loop free about half the time instead of never.
      if (limit === 1 && (this.rested.get(tenant) ?? 0) > now) return undefined;
      this.held.set(tenant, held + 1);
      return this.releaser(tenant);
    });
    this.scheduleRecheck();
    return waited;
  }

  /** Once; the tenant's waiters are looked at on the loop's next turn (never in the releasing microtask). */
  private releaser(tenant: string): () => void {
    return releaseOnce((taken) => {
      const now = performance.now();
      this.seen.set(tenant, now);
      if (this.waiting.get(tenant)?.length) this.rested.set(tenant, now + (now - taken));
      else this.rested.delete(tenant);
      const mine = (this.held.get(tenant) ?? 1) - 1;
      if (mine <= 0) this.held.delete(tenant);
      else this.held.set(tenant, mine);
      if (this.waiting.get(tenant)?.length) setImmediate(() => this.admit(tenant));
    });
  }

  /** Lets the tenant's first waiters in while it is under its limit. */
  private admit(tenant: string): void {
    const queue = this.waiting.get(tenant);
    while (queue?.length && queue[0]!()) {
      // taken; the next may fit too
    }
  }

  /** While anyone waits, looks again every `recheckMs`: a limit lifts when the loop quietens, not on a release. */
  private scheduleRecheck(): void {
    if (this.recheck) return;
    this.recheck = setTimeout(() => {
      this.recheck = undefined;
      for (const tenant of [...this.waiting.keys()]) this.admit(tenant);
      if (this.waiting.size > 0) this.scheduleRecheck();
    }, this.recheckMs);
    this.recheck.unref();
  }

  private forget(now: number): void {
    for (const [tenant, at] of this.seen) {
      if (now - at < this.activeMs || this.held.has(tenant)) continue;
      this.seen.delete(tenant);
      this.rested.delete(tenant);
    }
  }
}
