import { ApplicationFailure, Context } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import type { HttpOutcome } from '../src/connections/http.js';
import { isTransientError } from '../src/db/errors.js';
import { sendThroughConnection } from '../src/connections/http.js';
import { prepared, type Queryable } from '../src/db/pool.js';
import { type CallDetails, type EngineDeps, prepareCall, type ReadyCall } from '../src/engine/executor.js';
import { newId } from '../src/ids.js';
import type { PlaceWaiters, TenantCounter } from '../src/shares.js';
import type { CallArgs } from './call-args.js';
import { withHeartbeat } from './heartbeat.js';

export interface CallDeps extends EngineDeps {
  /** Outbound calls in flight on this worker, per tenant (TENANT_OUTBOUND_CALLS) and in all (its call slots). */
  calls: TenantCounter;
  /** The workflows whose calls this worker turned back, woken when a place frees (`turnBack: 'wake'`). */
  waiters?: PlaceWaiters;
}

/** What a call came to: the outcome, and the names the step's last part records it with. */
export interface CallResult {
  /** false: no request went out (the instance moved on, or the call cannot be made any more). */
  made: boolean;
  /**
   * A call made with a `ready` call (by its step): the delivery's claim, kept for the step to give back with the
   * outcome's recording (`finishOutboundCall`'s `claim`). Any other call gives its claim back itself.
   */
  claim?: string;
  details: CallDetails;
  outcome: HttpOutcome;
  /**
   * Turned back (only for a caller that passed `turnBack: 'result'`): nothing was sent, neither outcome nor
   * details count; ask again after this many milliseconds.
   */
  askAgainInMs?: number;
  /**
   * With `askAgainInMs`, for a caller that passed `turnBack: 'wake'`: the worker will signal `callPlaceFreed` to
   * the caller's workflow when a place it could take frees; `askAgainInMs` is then only how long to wait at most.
   */
  wakes?: true;
}

/**
 * The failure type a turned-back call is retried with (after `nextRetryDelay`, not counted as a call) when
 * its workflow does not take the turn-back as a result (one started by a release before it could).
 */
export const SHARE_FULL = 'TenantOutboundShareFull';

/** How long after its connection's `timeoutMs` a delivery's claim on its call outlives it (a stalled worker). */
const CLAIM_MARGIN_MS = 5_000;
/**
 * How soon a call whose earlier delivery is still out looks again (never after that delivery's claim lapses).
 * That delivery ends when its endpoint answers, which nothing here hears of: a delivery out for a short while
 * (a Cancel's, reopened by a revert) is looked at again after about 2 s, so the call goes out soon after it
 * ends; one out for long (its worker died, its claim runs to the connection's timeoutMs) ever less often, a
 * quarter of the time it has been out, up to 10 s: a five-minute claim costs about 35 looks, not 150.
 */
export function recheckAfterMs(outForMs: number): number {
  return Math.min(CALL_OUT_RECHECK_MAX_MS, Math.max(CALL_OUT_RECHECK_MS, outForMs / 4));
}
const CALL_OUT_RECHECK_MS = 2_000;
const CALL_OUT_RECHECK_MAX_MS = 10_000;
/**
 * How long a call over its tenant's share waits in the activity for a place one of the tenant's calls gives
 * back, before it is turned back (the worker's short queue: `TenantCounter.take`).
 */
export const SHARE_WAIT_MS = 1_000;
/**
 * How long a call turned back over its share waits for the signal that a place freed (`wakes`) before it asks
 * again anyway (spread by ±25 %, as every turn-back): what brings it back if the worker that turned it back
 * stopped, or kept no place free while another worker had one. Twice the delay it would otherwise wait where that
 * is longer (a tenant's large backlog), two minutes at most before the spread.
 */
export const WAKE_BACKSTOP_MS = 30_000;
const WAKE_BACKSTOP_MAX_MS = 120_000;

/**
 * The activities of the calls task queue: the outbound calls of Send HTTP Request, in slots of their own
 * (WORKER_OUTBOUND_CALL_SLOTS), so that no call, however slow its endpoint, holds a slot a plan batch or
 * another instance's step needs. A tenant with TENANT_OUTBOUND_CALLS calls in flight on this worker gets
 * its next call handed back, to come again in a second or two: it waits outside the worker. Only a few wait
 * inside it, briefly: a quarter of the slots in all, anyone's while free, and taken back for a tenant with fewer
 * than TENANT_OUTBOUND_CALLS waiting from the tenant furthest past that (`TenantCounter.take`), each for at most
 * SHARE_WAIT_MS, for the place the tenant's next call gives back. A call to an endpoint that answers
 * in milliseconds then goes on in milliseconds, where a turn-back cost it a durable timer, two workflow tasks
 * and a second activity task (a quarter of bench:engine's outbound-call instances were turned back so, with
 * an endpoint that answers at once); a call behind a hanging endpoint holds its slot no longer than that.
 *
 * A call is also handed back while an earlier delivery of the same call (its activity record, so the same
 * Idempotency-Key) is still out: a revert that reopened a call its plan had cancelled in flight, a retry
 * after a worker lost touch. Each delivery claims the record in `outbound_calls_out` before its request goes
 * out and gives the claim back when the call has ended (a call made by its step: in the statement that records
 * its outcome, `lockInstanceAndRecord`); a claim left by a worker that died lapses once that
 * delivery has certainly ended (its timeoutMs and a margin after its start). So the receiver never sees two
 * deliveries of one key at once.
 *
 * Handing back is how a call waits, an expected condition and no failure. Decision (attack report L1: a
 * warning with a stack trace for every turn-back, about 20 a second under one tenant's backlog, and
 * Temporal attempt counts of 80 for calls that only waited): the activity answers `askAgainInMs` and the
 * instance's workflow waits that long on a durable timer and asks again, so the activity's attempt stays 1,
 * nothing is logged and no failure is counted. A workflow that passes `turnBack: 'wake'` (the lifelong instance
 * workflow) also waits to be woken: the worker keeps it in its `PlaceWaiters` (src/shares.ts) and signals
 * `callPlaceFreed` when a place it could take frees here, so the call asks again at once rather than when its
 * timer is due, and the timer, now at least WAKE_BACKSTOP_MS less its spread, is only what brings it back
 * otherwise. Waiting in the activity for long would hold a worker slot, which is what the share exists to
 * prevent: hence the short queue only. A workflow started by a release before this one (it passes no `turnBack`)
 * gets the old retryable failure, now of the BENIGN category: the SDK logs it at debug and does not count it as a
 * failure.
 */
export function createCallActivities(deps: CallDeps, makeCall: CallMaker = createCallMaker(deps)) {
  return {
    /**
     * `tenantKey`: the instance's tenant, so that a call over its share is turned back before any other
     * work. `turnBack: 'result'`: the caller waits and asks again on `askAgainInMs` (instead of a retry).
     */
    callOutbound(args: CallArgs): Promise<CallResult> {
      return makeCall(args);
    },
  };
}

/**
 * Makes a call as `callOutbound` does. `ready`: the call as the step that started it had it, in this process (a
 * call made by its step, activities/index.ts): not read back from Postgres, and its claim, once the call is made,
 * left to the step to give back (`CallResult.claim`) in the statement that records the outcome.
 */
export type CallMaker = (args: CallArgs, ready?: ReadyCall) => Promise<CallResult>;

/** The maker of calls behind `callOutbound` (one per worker: its turn-backs are counted per tenant). */
export function createCallMaker(deps: CallDeps): CallMaker {
  const turnedBack = new DecayingCount(10_000);
  return async function makeCall(args: CallArgs, ready?: ReadyCall): Promise<CallResult> {
    const details = (): CallDetails => ({
      instanceId: args.instanceId,
      recordId: args.recordId,
      activityId: args.activityId ?? 'unknown',
      activityType: 'Elsa.Http.SendHttpRequest',
      connectionName: '',
    });
    const turnBack = (delayMs: number, message: string, waitsFor?: (askAgainInMs: number) => void): CallResult => {
      // Spread out, so that the waiting calls of one tenant do not come back all at once.
      const askAgainInMs = Math.max(100, Math.round(delayMs * (0.75 + Math.random() / 2)));
      waitsFor?.(askAgainInMs);
      const wakes = waitsFor !== undefined;
      if (args.turnBack !== undefined)
        return {
          made: false,
          details: details(),
          outcome: { ok: false, error: message },
          askAgainInMs,
          ...(wakes ? { wakes: true as const } : {}),
        };
      throw ApplicationFailure.create({
        type: SHARE_FULL,
        message,
        nextRetryDelay: askAgainInMs,
        category: ApplicationFailureCategory.BENIGN,
      });
    };
    // An earlier delivery's claim, made as this one's would be (for `outMs` and the margin), has `leftMs` to run.
    const earlierOut = (outMs: number, leftMs: number) =>
      turnBack(
        Math.min(recheckAfterMs(outMs + CLAIM_MARGIN_MS - leftMs), leftMs),
        'an earlier delivery of this call is still out; the call waits until it has ended',
      );
    // Over the tenant's share: back at once, having cost no query. How soon it comes again grows with how
    // many of the tenant's calls this worker turned back lately (about the square root of its backlog,
    // from 0.5 s to a minute), the same for an old call as for a new one, so that a tenant's waiting calls
    // cost the server little however many they are, and none of them starves.
    // A caller that takes the signal (`turnBack: 'wake'`) waits for it, and asks again on its own only after a
    // longer wait.
    const workflowId =
      args.turnBack === 'wake' || args.inStep ? Context.current().info.workflowExecution?.workflowId : undefined;
    const waiters = workflowId !== undefined ? deps.waiters : undefined;
    const overShare = async (tenant: string): Promise<CallResult | undefined> => {
      // A call waits a little inside the worker even while others wait in line outside it: to an endpoint that
      // answers at once, a place frees within milliseconds, and a turn-back costs a wake, two workflow tasks and
      // an activity task. A place given back to a call waiting here also wakes the first in line (once a second),
      // to wait here in its turn. A place taken takes the workflow out of the wake line, if an earlier ask left it
      // there.
      if ((await deps.calls.take(tenant, SHARE_WAIT_MS)) === 'taken') {
        if (workflowId !== undefined) deps.waiters?.remove(tenant, workflowId);
        return undefined;
      }
      // In its step: back to the workflow, which asks for the call (no turn-back counted here).
      if (args.inStep)
        return { made: false, details: details(), outcome: { ok: false, error: 'no place free' }, askAgainInMs: 0 };
      const delayMs = Math.min(60_000, 500 * (1 + turnedBack.add(tenant) / deps.calls.perTenant));
      const message = `this tenant has ${deps.calls.perTenant} outbound calls in flight on this worker (TENANT_OUTBOUND_CALLS); the call waits its turn`;
      if (!waiters || workflowId === undefined) return turnBack(delayMs, message);
      const backstopMs = Math.min(WAKE_BACKSTOP_MAX_MS, Math.max(WAKE_BACKSTOP_MS, 2 * delayMs));
      // In line until its own timer is due; woken when a place frees before that.
      return turnBack(backstopMs, message, (askAgainInMs) => waiters.add(tenant, workflowId, askAgainInMs));
    };
    if (ready !== undefined) {
      // The call as its step had it: nothing read back. Its claim also checks, in the same statement, that the call
      // is still its instance's to make, as one read back is checked: an alteration that ended the instance or closed
      // the record while the call waited for its place stops it (back to its workflow, which reads it back).
      const back = await overShare(ready.tenantKey);
      if (back) return back;
      let claim: string | undefined;
      try {
        const claimed = await claimCall(deps.pool, args.recordId, ready.connection.timeoutMs + CLAIM_MARGIN_MS, true);
        if (typeof claimed === 'number') return earlierOut(ready.connection.timeoutMs, claimed);
        claim = claimed.claim;
        const outcome = await withHeartbeat(() =>
          sendThroughConnection(ready.connection, ready.request, deps.outbound, deps.callMetrics),
        );
        const kept = claim;
        claim = undefined;
        return { made: true, details: ready.details, outcome, claim: kept };
      } finally {
        deps.calls.give(ready.tenantKey);
        if (claim !== undefined) await releaseCall(deps, args.recordId, claim);
      }
    }
    if (args.tenantKey !== undefined) {
      const back = await overShare(args.tenantKey);
      if (back) return back;
    }
    let prepared;
    try {
      prepared = ready ?? (await prepareCall(deps, args.instanceId, args.recordId, args.connectionName));
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
      const back = await overShare(prepared.tenantKey);
      if (back) return back;
    }
    let claim: string | undefined;
    try {
      const claimed = await claimCall(deps.pool, args.recordId, prepared.connection.timeoutMs + CLAIM_MARGIN_MS);
      if (typeof claimed === 'number') return earlierOut(prepared.connection.timeoutMs, claimed);
      claim = claimed.claim;
      const outcome = await withHeartbeat(() =>
        sendThroughConnection(prepared.connection, prepared.request, deps.outbound, deps.callMetrics),
      );
      return { made: true, details: prepared.details, outcome };
    } finally {
      deps.calls.give(prepared.tenantKey);
      if (claim !== undefined) await releaseCall(deps, args.recordId, claim);
    }
  };
}

/**
 * Claims the call of activity record `recordId` for one delivery of at most `outMs`: the claim, or how many
 * milliseconds the claim of a delivery still out has left. One statement, so two deliveries racing for the
 * same call cannot both win (the row's lock orders them); no transaction stays open while the call is out.
 */
async function claimCall(
  db: Queryable,
  recordId: string,
  outMs: number,
  /**
   * Claim only while the call is still its instance's to make (its record Running, the instance neither Finished
   * nor Faulted), as `prepareCall` reads it; else nothing is claimed and the answer is 0 (ask again, read back).
   */
  stillOut = false,
): Promise<{ claim: string } | number> {
  const claim = newId();
  const { rows } = await db.query(
    prepared(
      `INSERT INTO outbound_calls_out AS o (record_id, claim, out_until)
       ${
         stillOut
           ? `SELECT $1, $2, now() + make_interval(secs => $3::double precision / 1000)
               WHERE EXISTS (SELECT 1 FROM activity_records r JOIN workflow_instances w ON w.id = r.instance_id
                              WHERE r.id = $4 AND r.status = 'Running' AND w.status <> 'Finished'
                                AND w.sub_status <> 'Faulted')`
           : `VALUES ($1, $2, now() + make_interval(secs => $3::double precision / 1000))`
       }
       ON CONFLICT (record_id) DO UPDATE SET claim = excluded.claim, out_until = excluded.out_until
        WHERE o.out_until <= now()
       RETURNING claim`,
      // The record's id a second time, as the record's bigint key ($1 is the claim's text key).
      stillOut ? [recordId, claim, outMs, recordId] : [recordId, claim, outMs],
    ),
  );
  if (rows.length > 0) return { claim };
  const { rows: held } = await db.query<{ ms: number }>(
    `SELECT greatest(0, ceil(extract(epoch FROM out_until - now()) * 1000))::int AS ms
       FROM outbound_calls_out WHERE record_id = $1`,
    [recordId],
  );
  // Gone meanwhile (the other delivery ended): ask again soon.
  return held[0]?.ms ?? 0;
}

/**
 * Gives a delivery's claim back once its call has ended (and drops claims that lapsed long ago, left by
 * workers that died). A failure here only delays the call's next delivery until the claim lapses, so it is
 * logged and the call's outcome still counts.
 */
async function releaseCall(deps: CallDeps, recordId: string, claim: string): Promise<void> {
  try {
    await deps.pool.query(
      prepared(
        `DELETE FROM outbound_calls_out
          WHERE (record_id = $1 AND claim = $2) OR out_until < now() - interval '1 hour'`,
        [recordId, claim],
      ),
    );
  } catch (err) {
    deps.logger.warn(
      { err, recordId },
      'the claim of an outbound call that has ended could not be given back; a later delivery of the call waits until it lapses',
    );
  }
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
