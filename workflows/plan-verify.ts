import { sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

/**
 * A plan's `verify` in its workflow (contract section 12): set-based checks (a local activity) on durable timers,
 * so that a deadline passes and is checked whatever process stopped meanwhile.
 */

/**
 * Since this patch: a plan with `verify` stays Running after its batches until no completed job is Pending
 * verification: it checks, then waits on a durable timer until the next check.
 */
export const VERIFY_PATCH = 'plan-verify';
/**
 * Since this patch: a plan that stopped (Cancelled, Failed) with completed jobs Pending verification goes on
 * checking them until none is; before it they stayed Pending.
 */
export const VERIFY_AFTER_STOP_PATCH = 'plan-verify-after-stop';
/**
 * Since this patch: a Paused plan (a canary, a manual pause, too many failures, its schedule) checks its
 * completed jobs while it waits, so a canary says whether its change worked before the rest runs.
 */
export const VERIFY_WHILE_PAUSED_PATCH = 'plan-verify-while-paused';

/** The first wait between two checks of a plan's effect; each wait after it doubles, up to the longest. */
const VERIFY_FIRST_WAIT_MS = 1_000;
const VERIFY_LONGEST_WAIT_MS = 60_000;

type Check = Activities['checkVerification'];
type VerificationCheck = Awaited<ReturnType<Check>>;
/** What a plan's progress shows of its verification. */
interface Counts {
  verified?: number;
  unverified?: number;
}

/** One check; its counts into `state` once none is Pending. */
async function checkOnce(check: Check, planId: string, state: Counts): Promise<VerificationCheck> {
  const result = await check(planId);
  if (result.verified !== undefined) {
    state.verified = result.verified;
    state.unverified = result.unverified ?? 0;
  }
  return result;
}

/**
 * Checks a plan's effect until no completed job is Pending verification (a plan without `verify`: one check that
 * says so). The waits between checks grow from a second to a minute, and never pass the next deadline.
 */
export async function verifyEffect(
  check: Check,
  planId: string,
  state: Counts,
  note: (text: string) => void,
): Promise<void> {
  for (let wait = VERIFY_FIRST_WAIT_MS; ; wait = Math.min(wait * 2, VERIFY_LONGEST_WAIT_MS)) {
    const result = await checkOnce(check, planId, state);
    if (!result.verifying || result.pending === 0) return;
    note(`verifying: ${result.pending} job(s) still to match verify.expect`);
    await sleep(Math.max(100, Math.min(wait, result.nextDeadlineInMs ?? wait)));
  }
}

/**
 * The checks of a Paused plan: one per look while it waits; `next` answers how long to wait before the next
 * (growing as `verifyEffect`'s, never past the next deadline), or null when no job is Pending.
 */
export class PausedVerification {
  private wait = VERIFY_FIRST_WAIT_MS;

  constructor(
    private readonly check: Check,
    private readonly planId: string,
    private readonly state: Counts,
  ) {}

  async next(): Promise<number | null> {
    const result = await checkOnce(this.check, this.planId, this.state);
    if (!result.verifying || result.pending === 0) {
      this.wait = VERIFY_FIRST_WAIT_MS;
      return null;
    }
    const ms = Math.max(100, Math.min(this.wait, result.nextDeadlineInMs ?? this.wait));
    this.wait = Math.min(this.wait * 2, VERIFY_LONGEST_WAIT_MS);
    return ms;
  }
}
