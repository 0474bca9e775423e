import { ApplicationFailure } from '@temporalio/activity';
import type { HttpOutcome } from '../src/connections/http.js';
import { isTransientError } from '../src/db/errors.js';
import { sendThroughConnection } from '../src/connections/http.js';
import { type CallDetails, type EngineDeps, prepareCall } from '../src/engine/executor.js';
import type { TenantCounter } from '../src/shares.js';
import { withHeartbeat } from './heartbeat.js';

export interface CallDeps extends EngineDeps {
  /** Outbound calls in flight on this worker, per tenant (TENANT_OUTBOUND_CALLS) and in all (its call slots). */
  calls: TenantCounter;
}

/** What a call came to: the outcome, and the names the step's last part records it with. */
export interface CallResult {
  /** false: no request went out (the instance moved on, or the call cannot be made any more). */
  made: boolean;
  details: CallDetails;
  outcome: HttpOutcome;
}

/** The failure type a call over its tenant's share is retried with (after `nextRetryDelay`, not counted as a call). */
export const SHARE_FULL = 'TenantOutboundShareFull';

/**
 * The activities of the calls task queue: the outbound calls of Send HTTP Request, in slots of their own
 * (WORKER_OUTBOUND_CALL_SLOTS), so that no call, however slow its endpoint, holds a slot a plan batch or
 * another instance's step needs. A tenant with TENANT_OUTBOUND_CALLS calls in flight on this worker gets
 * its next call handed back to Temporal at once, to come again in a second or two: it waits in the queue,
 * where Task Queue Fairness lets other tenants' calls pass, and never in a slot.
 */
export function createCallActivities(deps: CallDeps) {
  const turnedBack = new DecayingCount(10_000);
  return {
    /** `tenantKey`: the instance's tenant, so that a call over its share is turned back before any other work. */
    async callOutbound(args: {
      instanceId: string;
      recordId: string;
      tenantKey?: string;
      activityId?: string;
    }): Promise<CallResult> {
      // Over the tenant's share: back to the queue at once, having cost no query. How soon it comes again
      // grows with how many of the tenant's calls this worker turned back lately (about the square root of
      // its backlog, from 0.5 s to a minute), the same for an old call as for a new one, so that a tenant's
      // waiting calls cost the server little however many they are, and none of them starves.
      const share = (tenant: string) => {
        if (deps.calls.tryTake(tenant) === 'taken') return;
        const delay = Math.min(60_000, 500 * (1 + turnedBack.add(tenant) / deps.calls.perTenant));
        throw ApplicationFailure.create({
          type: SHARE_FULL,
          message: `this tenant has ${deps.calls.perTenant} outbound calls in flight on this worker (TENANT_OUTBOUND_CALLS); the call waits its turn`,
          // Spread out, so that the waiting calls of one tenant do not come back all at once.
          nextRetryDelay: Math.round(delay * (0.75 + Math.random() / 2)),
        });
      };
      if (args.tenantKey !== undefined) share(args.tenantKey);
      let prepared;
      try {
        prepared = await prepareCall(deps, args.instanceId, args.recordId);
      } catch (err) {
        if (args.tenantKey !== undefined) deps.calls.give(args.tenantKey);
        if (isTransientError(err)) throw err;
        // What no retry can fix (a configuration that no longer decrypts, a bug): the step faults with it
        // instead of the call being tried again forever.
        deps.logger.error({ err, instanceId: args.instanceId }, 'an outbound call could not be prepared');
        return {
          made: false,
          details: {
            instanceId: args.instanceId,
            recordId: args.recordId,
            activityId: args.activityId ?? 'unknown',
            activityType: 'Elsa.Http.SendHttpRequest',
            connectionName: '',
          },
          outcome: { ok: false, error: `the call could not be prepared: ${(err as Error).message}` },
        };
      }
      if (prepared.kind === 'skip') {
        if (args.tenantKey !== undefined) deps.calls.give(args.tenantKey);
        return {
          made: false,
          details: prepared.details,
          outcome: { ok: false, error: `the call was not made: ${prepared.why ?? 'the instance moved on'}` },
        };
      }
      // A call scheduled before the tenant came with it takes its share here.
      if (args.tenantKey === undefined) share(prepared.tenantKey);
      try {
        const outcome = await withHeartbeat(() =>
          sendThroughConnection(prepared.connection, prepared.request, deps.outbound, deps.callMetrics),
        );
        return { made: true, details: prepared.details, outcome };
      } finally {
        deps.calls.give(prepared.tenantKey);
      }
    },
  };
}

export type CallActivities = ReturnType<typeof createCallActivities>;

/** Per tenant, how many events happened lately: each counts 1, fading with time constant `tauMs`. */
class DecayingCount {
  private readonly counts = new Map<string, { value: number; at: number }>();

  constructor(private readonly tauMs: number) {}

  /** Counts one for `key`; answers the count now. */
  add(key: string, now = Date.now()): number {
    const c = this.counts.get(key);
    const value = (c ? c.value * Math.exp(-(now - c.at) / this.tauMs) : 0) + 1;
    this.counts.set(key, { value, at: now });
    if (this.counts.size > 10_000) this.forgetFaded(now);
    return value;
  }

  private forgetFaded(now: number): void {
    for (const [key, c] of this.counts)
      if (c.value * Math.exp(-(now - c.at) / this.tauMs) < 0.5) this.counts.delete(key);
  }
}
