/**
 * Per-tenant shares of what tenants share on one node (contract section 8, "Tenant shares"): a count of what
 * each tenant holds against its share, in process. Every node and worker keeps its own; the limits are per
 * node, as the settings say.
 */

/** What a tenant holds of a resource it can be refused (event streams): a share per tenant, a limit overall. */
export class TenantCounter {
  private readonly held = new Map<string, number>();
  private all = 0;

  constructor(
    readonly perTenant: number,
    readonly overall: number,
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

  /** What all tenants hold now (the operator's metrics read it; it names no tenant). */
  get total(): number {
    return this.all;
  }

  give(tenant: string): void {
    const mine = this.held.get(tenant) ?? 0;
    if (mine <= 1) this.held.delete(tenant);
    else this.held.set(tenant, mine - 1);
    this.all = Math.max(0, this.all - 1);
  }
}

/** Thrown by `TenantGate.acquire` when the tenant's turn did not come within the time allowed. */
export class ShareTimeoutError extends Error {
  override name = 'ShareTimeoutError';
}

/**
 * A semaphore per tenant with a first-come queue: a tenant holds at most `perTenant` at once; its further
 * callers wait their turn (or time out) while other tenants' callers go on.
 */
export class TenantGate {
  private readonly held = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(readonly perTenant: number) {}

  /** Resolves with the release function once the tenant is under its share; rejects after `timeoutMs`. */
  acquire(tenant: string, timeoutMs: number, signal?: AbortSignal): Promise<() => void> {
    const release = this.releaser(tenant);
    if ((this.held.get(tenant) ?? 0) < this.perTenant && !this.waiting.get(tenant)?.length) {
      this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(tenant) ?? [];
      this.waiting.set(tenant, queue);
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const i = queue.indexOf(turn);
        if (i >= 0) queue.splice(i, 1);
        if (queue.length === 0 && this.waiting.get(tenant) === queue) this.waiting.delete(tenant);
      };
      const turn = () => {
        cleanup();
        this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
        resolve(release);
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

  /** Releases once (a second call does nothing), handing the place to the tenant's next waiter. */
  private releaser(tenant: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const mine = (this.held.get(tenant) ?? 1) - 1;
      if (mine <= 0) this.held.delete(tenant);
      else this.held.set(tenant, mine);
      this.waiting.get(tenant)?.[0]?.();
    };
  }
}
