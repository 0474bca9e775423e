import { setTimeout as sleep } from 'node:timers/promises';
import { PLAN_STATUS } from '../alterations/model.js';
import { type Client, type PlanEvent, type PlanView, ProblemError } from '../client/index.js';
import { StreamLimitError } from '../client/sse.js';
import { Interrupted } from './failure.js';
import { duration, n, planStatusName, planStatusText, safeCell, stackedBar } from './format.js';
import { driftText, verificationText } from './plan-text.js';

interface WatchIo {
  json: boolean;
  out: (text: string) => void;
  isTty: boolean;
  /** The command that watches this plan again, said when the watch is interrupted. */
  watchAgain: string;
}

const RECONNECTS = 5;
/** How often a plan is read when its event stream is refused (the tenant's or the node's streams are full). */
const POLL_MS = 2_000;

/**
 * The plan's events: its event stream, or, when the service refuses one (429: this tenant holds its share
 * of streams on that node; 503: the node holds its limit), the same events made from reading the plan
 * every two seconds. A watch never fails because streams are busy.
 */
async function* planEvents(
  client: Client,
  planId: string,
  signal: AbortSignal,
  onFallback: () => void,
): AsyncGenerator<PlanEvent> {
  try {
    yield* client.plans.events(planId, signal);
    return;
  } catch (err) {
    if (!(err instanceof ProblemError) || (err.status !== 429 && err.status !== 503)) throw err;
  }
  onFallback();
  let sample: { at: number; done: number } | undefined;
  let rate = 0;
  for (;;) {
    const { plan } = await client.plans.get(planId, { signal });
    if (
      plan.status === PLAN_STATUS.Completed ||
      plan.status === PLAN_STATUS.Failed ||
      plan.status === PLAN_STATUS.Cancelled
    ) {
      yield { event: 'done', data: plan };
      return;
    }
    const c = plan.jobCounts;
    const done = c.completed + c.failed + c.cancelled + c.skipped;
    const now = Date.now();
    if (sample && now > sample.at) rate = Math.round(((done - sample.done) * 1000) / (now - sample.at));
    sample = { at: now, done };
    yield {
      event: 'progress',
      data: { status: plan.status, jobCounts: c, instancesPerSecond: rate, pauseReason: plan.pauseReason },
    };
    await sleep(POLL_MS, undefined, { signal });
  }
}

/**
 * The bar's line on a terminal: redrawn in place, and ended (the cursor put on a new line) before anything
 * else is printed, so that no message lands on the bar's line.
 */
function barLine(isTty: boolean) {
  let drawn = false;
  return {
    draw(text: string) {
      if (!isTty) return;
      process.stdout.write(`\r\x1b[2K${text}`);
      drawn = true;
    },
    end() {
      if (drawn) process.stdout.write('\n');
      drawn = false;
    },
  };
}

/**
 * Follows a plan through its event stream to the end: a progress bar with done/total, instances per
 * second, ETA and failures (redrawn in place on a terminal, a line every few seconds otherwise; JSON
 * lines with --json). The exit code: 0 when the plan Completed with no failed job (and, with verify, none
 * not verified), 1 otherwise. Ctrl-C
 * ends the watch, not the plan: the bar's line is ended and the command to watch it again said (exit 130).
 */
export async function watchPlan(client: Client, planId: string, io: WatchIo): Promise<number> {
  const interrupt = new AbortController();
  const onSigint = () => {
    if (interrupt.signal.aborted) process.exit(130); // a second Ctrl-C does not wait for anything
    interrupt.abort();
  };
  process.on('SIGINT', onSigint);
  const bar = barLine(io.isTty);
  try {
    return await follow(client, planId, io, bar, interrupt.signal);
  } catch (err) {
    if (!interrupt.signal.aborted) throw err;
    throw new Interrupted(`the plan goes on; watch it again with: ${io.watchAgain}`);
  } finally {
    bar.end();
    process.off('SIGINT', onSigint);
  }
}

type Bar = ReturnType<typeof barLine>;
type Progress = Extract<PlanEvent, { event: 'progress' }>['data'];

async function follow(client: Client, planId: string, io: WatchIo, bar: Bar, signal: AbortSignal): Promise<number> {
  const progress = progressPrinter(planId, io, bar);
  let final: PlanView | undefined;
  let heard = false;
  for (let attempt = 0; !final && attempt <= RECONNECTS; attempt++) {
    // A stream cut short (a restarted API node) is picked up again: the service sends the current state at once.
    if (attempt > 0) await sleep(Math.min(5_000, 500 * 2 ** attempt), undefined, { signal });
    try {
      const fallback = () => {
        if (!io.json)
          io.out('The service has no event stream free for this plan now; following it by reading it every 2 s');
      };
      for await (const e of planEvents(client, planId, signal, fallback)) {
        heard = true;
        if (e.event === 'done') {
          final = e.data;
          break;
        }
        progress(e.data);
      }
    } catch (err) {
      // Only a stream that was heard from is reconnected: a first answer that fails says so at once.
      const giveUp = signal.aborted || !heard || attempt === RECONNECTS;
      if (giveUp || (err as { status?: number }).status || err instanceof StreamLimitError) throw err;
    }
  }
  bar.end();
  if (!final) throw new Error(`The event stream of plan ${planId} ended before the plan did`);
  printFinal(final, planId, io);
  // With verify, a job whose instance did not come to match in time did not work either.
  const unverified = final.verification?.unverified ?? 0;
  return final.status === PLAN_STATUS.Completed && final.jobCounts.failed === 0 && unverified === 0 ? 0 : 1;
}

/**
 * What a watch prints of each progress event: a JSON line with --json; else the bar (redrawn on a terminal,
 * a line every 2 s otherwise), and a line of its own when the plan pauses.
 */
function progressPrinter(planId: string, io: WatchIo, bar: Bar): (p: Progress) => void {
  let lastLine = 0;
  let lastPause: string | null | undefined;
  return (p) => {
    if (io.json) return io.out(JSON.stringify({ event: 'progress', ...p }));
    const c = p.jobCounts;
    if (p.status === PLAN_STATUS.Paused && p.pauseReason !== lastPause) {
      // Said once per pause, on its own line: the watch goes on until the plan ends.
      bar.end();
      io.out(
        `Paused (${safeCell(p.pauseReason ?? 'manual')}) after ${n(c.completed + c.failed + c.cancelled + c.skipped)} of ${n(c.total)}: wfa plans resume ${safeCell(planId)}`,
      );
    }
    lastPause = p.status === PLAN_STATUS.Paused ? p.pauseReason : undefined;
    if (c.total === 0 && p.status < PLAN_STATUS.Running) {
      // Jobs are not generated yet: the matching set is being frozen.
      if (!io.isTty) io.out(`${planStatusName(p.status)}: selecting the matching instances…`);
      return;
    }
    if (io.isTty) bar.draw(progressLine(p));
    else if (Date.now() - lastLine >= 2_000) {
      io.out(progressLine(p));
      lastLine = Date.now();
    }
  };
}

/** `██░░ 6,000/100,000 6% · 9,960/s · ETA 9s · 0 failed · Running` */
function progressLine(p: Progress): string {
  const c = p.jobCounts;
  const finished = c.completed + c.failed + c.cancelled + c.skipped;
  const eta = p.instancesPerSecond > 0 ? duration((c.total - finished) / p.instancesPerSecond) : '?';
  const bar = stackedBar(
    [
      { value: c.completed, char: '█' },
      { value: c.failed, char: '▓' },
    ],
    c.total,
    30,
  );
  const percent = c.total ? Math.floor((100 * finished) / c.total) : 0;
  return (
    `${bar} ${n(finished)}/${n(c.total)} ${percent}% · ${n(p.instancesPerSecond)}/s · ETA ${eta} · ` +
    `${n(c.failed)} failed · ${planStatusName(p.status)}`
  );
}

/** The plan's end: a JSON line with --json, else its outcome and counts (and where its failed jobs are). */
function printFinal(final: PlanView, planId: string, io: WatchIo): void {
  const c = final.jobCounts;
  if (io.json) return io.out(JSON.stringify({ event: 'done', ...final }));
  io.out(
    `${planStatusText(final.status, c, final.verification)}: ${n(c.completed)} completed, ${n(c.failed)} failed, ${n(c.cancelled)} cancelled${c.skipped ? `, ${n(c.skipped)} skipped` : ''} of ${n(c.total)}` +
      (final.failureReason ? ` (${safeCell(final.failureReason)})` : '') +
      (c.failed ? `\n  see them: wfa plans jobs ${safeCell(planId)} --failed` : '') +
      (final.verification ? `\n  ${verificationText(final.verification)}` : '') +
      (final.drift ? `\n  ${driftText(final.drift)}` : ''),
  );
}
