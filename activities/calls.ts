import { ApplicationFailure } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
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
  /**
   * Turned back (only for a caller that passed `turnBack: 'result'`): nothing was sent, neither outcome nor
   * details count; ask again after this many milliseconds.
   */
  askAgainInMs?: number;
}

/**
 * The failure type a turned-back call is retried with (after `nextRetryDelay`, not counted as a call) when
 * its workflow does not take the turn-back as a result (one started by a release before it could).
 */
export const SHARE_FULL = 'TenantOutboundShareFull';

/**
 * The activities of the calls task queue: the outbound calls of Send HTTP Request, in slots of their own
 * (WORKER_OUTBOUND_CALL_SLOTS), so that no call, however slow its endpoint, holds a slot a plan batch or
 * another instance's step needs. A tenant with TENANT_OUTBOUND_CALLS calls in flight on this worker gets
 * its next call handed back at once, to come again in a second or two: it waits outside the worker, and
 * never in a slot.
 *
 * Handing back is how a call waits, an expected condition and no failure. Decision (attack report L1: a
 * warning with a stack trace for every turn-back, about 20 a second under one tenant's backlog, and
 * Temporal attempt counts of 80 for calls that only waited): the activity answers `askAgainInMs` and the
 * instance's workflow waits that long on a durable timer and asks again, so the activity's attempt stays 1,
 * nothing is logged and no failure is counted. Waiting in the activity instead would hold a worker slot,
 * which is what the share exists to prevent. A workflow started by a release before this one (it does not
 * pass `turnBack: 'result'`) gets the old retryable failure, now of the BENIGN category: the SDK logs it at
 * debug and does not count it as a failure.
 */
export function createCallActivities(deps: CallDeps) {
  const turnedBack = new DecayingCount(10_000);
  return {
    /**
     * `tenantKey`: the instance's tenant, so that a call over its share is turned back before any other
     * work. `turnBack: 'result'`: the caller waits and asks again on `askAgainInMs` (instead of a retry).
     */
    async callOutbound(args: {
      instanceId: string;
      recordId: string;
      tenantKey?: string;
      activityId?: string;
      turnBack?: 'result';
    }): Promise<CallResult> {
      const details = (): CallDetails => ({
        instanceId: args.instanceId,
        recordId: args.recordId,
        activityId: args.activityId ?? 'unknown',
        activityType: 'Elsa.Http.SendHttpRequest',
        connectionName: '',
      });
      const turnBack = (delayMs: number, message: string): CallResult => {
        // Spread out, so that the waiting calls of one tenant do not come back all at once.
        const askAgainInMs = Math.max(100, Math.round(delayMs * (0.75 + Math.random() / 2)));
        if (args.turnBack === 'result')
          return { made: false, details: details(), outcome: { ok: false, error: message }, askAgainInMs };
        throw ApplicationFailure.create({
          type: SHARE_FULL,
          message,
          nextRetryDelay: askAgainInMs,
          category: ApplicationFailureCategory.BENIGN,
        });
      };
      // Over the tenant's share: back at once, having cost no query. How soon it comes again grows with how
      // many of the tenant's calls this worker turned back lately (about the square root of its backlog,
      // from 0.5 s to a minute), the same for an old call as for a new one, so that a tenant's waiting calls
      // cost the server little however many they are, and none of them starves.
      const overShare = (tenant: string): CallResult | undefined => {
        if (deps.calls.tryTake(tenant) === 'taken') return undefined;
        return turnBack(
          Math.min(60_000, 500 * (1 + turnedBack.add(tenant) / deps.calls.perTenant)),
          `this tenant has ${deps.calls.perTenant} outbound calls in flight on this worker (TENANT_OUTBOUND_CALLS); the call waits its turn`,
        );
      };
      if (args.tenantKey !== undefined) {
        const back = overShare(args.tenantKey);
        if (back) return back;
      }
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
          details: details(),
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
      if (args.tenantKey === undefined) {
        const back = overShare(prepared.tenantKey);
        if (back) return back;
      }
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
