import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { isFinished } from '../alterations/model.js';
import { getPlanView } from '../alterations/plans.js';
import type { JobCounts, PlanView } from '../alterations/views.js';
import { stillSignedIn } from '../auth/tokens.js';
import { ADMIN_PRINCIPAL_ID } from '../auth/api-keys.js';
import { NodeBusyError, TenantShareError } from '../errors.js';
import type { TenantCounter } from '../shares.js';
import { type AppEnv, callerTenant } from './context.js';

/**
 * Polling of Postgres per stream: fast while the plan moves, slower while it does not. A change of the
 * plan's status wakes the stream at once (`PlanStatusListener`), so `done` does not wait for a poll.
 */
const MIN_INTERVAL_MS = 500;
const MAX_INTERVAL_MS = 2_000;
/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;
/**
 * How often a stream asks whether its credentials still stand (key not revoked, user not deleted, session
 * not signed out): the contract's "at least every 5 s", so a revocation ends it within 10 s.
 */
const RECHECK_MS = 5_000;
/** Retry-After of a refused stream: streams end when their plan does, so a place frees up soon. */
const RETRY_AFTER_SECONDS = 5;

const done = (c: JobCounts) => c.completed + c.failed + c.cancelled;

/**
 * The event stream of one plan for the request's principal (already authorized to view plans): the API's
 * route above and the console's plan page (src/console/routes.ts, with its session's principal) both
 * answer with it, so both count against the same per-tenant share (`streams`) and both end within 10 s of
 * a revocation (RECHECK_MS). `more` adds fields to each `progress` event for the console's page (the API's
 * events carry exactly the contract's four).
 */
export async function planEventStream(
  c: Context<AppEnv>,
  planId: string,
  streams: TenantCounter,
  shutdown?: AbortSignal,
  more?: (plan: PlanView) => Record<string, unknown>,
): Promise<Response> {
  const { pool, planStatus, planEventPollMs } = c.get('deps');
  const principal = c.get('principal');
  const minInterval = planEventPollMs?.min ?? MIN_INTERVAL_MS;
  const maxInterval = planEventPollMs?.max ?? MAX_INTERVAL_MS;
  const tenant = callerTenant(c);
  // Heard from before the first read, so that no change between the read and the first wait goes unheard.
  const watch = planStatus?.watch(planId);
  // Read once before streaming: an unknown plan (or another tenant's) is a 404 problem, not an empty stream.
  let plan: PlanView;
  try {
    plan = await getPlanView(pool, tenant, planId);
  } catch (err) {
    watch?.close();
    throw err;
  }
  const taken = streams.tryTake(tenant);
  if (taken !== 'taken') {
    watch?.close();
    if (taken === 'tenant')
      throw new TenantShareError(
        `This tenant has ${streams.perTenant} event streams open on this node, its share (EVENT_STREAMS_PER_TENANT); close one or retry later`,
        RETRY_AFTER_SECONDS,
      );
    throw new NodeBusyError(
      `This node serves ${streams.overall} event streams, its limit (EVENT_STREAMS_PER_NODE); retry later`,
      RETRY_AFTER_SECONDS,
    );
  }
  c.header('Cache-Control', 'no-store');
  return streamSSE(c, async (stream) => {
    let closed = false;
    const end = () => {
      closed = true;
      watch?.close();
    };
    stream.onAbort(end);
    // The node stops: every stream ends now instead of holding the shutdown up.
    if (shutdown?.aborted) end();
    shutdown?.addEventListener('abort', end, { once: true });
    let checked = Date.now();
    // Until the plan's status changes (a pause, a resume, the end) or `ms` are up.
    const pause = (ms: number) => (watch ? watch.wait(ms) : stream.sleep(ms));
    try {
      let last = '';
      let lastSample = { at: Date.now(), done: done(plan.jobCounts) };
      let rate = 0;
      let interval = minInterval;
      let lastWrite = Date.now();
      let lastProgress = 0;
      while (!closed) {
        if (Date.now() - checked >= RECHECK_MS) {
          checked = Date.now();
          if (!(await stillSignedIn(pool, principal, principal.id === ADMIN_PRINCIPAL_ID))) {
            await stream.write(': ended: the credentials of this stream were revoked or signed out\n\n');
            break;
          }
        }
        if (isFinished(plan.status)) {
          await stream.writeSSE({ event: 'done', data: JSON.stringify(plan) });
          break;
        }
        const now = Date.now();
        const progressed = done(plan.jobCounts);
        if (now > lastSample.at && progressed !== lastSample.done) {
          rate = Math.round(((progressed - lastSample.done) * 1000) / (now - lastSample.at));
          lastSample = { at: now, done: progressed };
        } else if (now - lastSample.at > 5_000) {
          rate = 0;
        }
        const progress = JSON.stringify({
          status: plan.status,
          jobCounts: plan.jobCounts,
          instancesPerSecond: rate,
          pauseReason: plan.pauseReason,
          ...more?.(plan),
        });
        if (progress !== last) {
          // At most one progress event per interval: a change heard sooner (a status change wakes the
          // stream) waits out the rest of it, unless the plan ends meanwhile.
          const early = last === '' ? 0 : lastProgress + minInterval - Date.now();
          if (early > 0) {
            await pause(early);
            if (closed) break;
            plan = await getPlanView(pool, tenant, planId);
            continue;
          }
          await stream.writeSSE({ event: 'progress', data: progress });
          last = progress;
          lastWrite = lastProgress = Date.now();
          interval = minInterval;
        } else {
          interval = Math.min(maxInterval, Math.round(interval * 1.5));
          if (Date.now() - lastWrite >= KEEPALIVE_MS) {
            await stream.write(': keep-alive\n\n');
            lastWrite = Date.now();
          }
        }
        await pause(interval);
        if (closed) break;
        plan = await getPlanView(pool, tenant, planId);
      }
    } finally {
      streams.give(tenant);
      shutdown?.removeEventListener('abort', end);
      watch?.close();
    }
  });
}
