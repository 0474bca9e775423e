import { ApplicationFailure } from '@temporalio/activity';
import type { HttpOutcome } from '../src/connections/http.js';
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
  return {
    async callOutbound(args: { instanceId: string; recordId: string }): Promise<CallResult> {
      const prepared = await prepareCall(deps, args.instanceId, args.recordId);
      if (prepared.kind === 'skip') {
        return {
          made: false,
          details: prepared.details,
          outcome: { ok: false, error: `the call was not made: ${prepared.why ?? 'the instance moved on'}` },
        };
      }
      const taken = deps.calls.tryTake(prepared.tenantKey);
      if (taken !== 'taken') {
        throw ApplicationFailure.create({
          type: SHARE_FULL,
          message: `this tenant has ${deps.calls.perTenant} outbound calls in flight on this worker (TENANT_OUTBOUND_CALLS); the call waits its turn`,
          // Spread out, so that the waiting calls of one tenant do not come back all at once.
          nextRetryDelay: 1_000 + Math.floor(Math.random() * 1_000),
        });
      }
      try {
        const outcome = await withHeartbeat(() =>
          sendThroughConnection(prepared.connection, prepared.request, deps.outbound),
        );
        return { made: true, details: prepared.details, outcome };
      } finally {
        deps.calls.give(prepared.tenantKey);
      }
    },
  };
}

export type CallActivities = ReturnType<typeof createCallActivities>;
