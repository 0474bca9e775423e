/**
 * How the engine bench measures, on both sides alike: requests fired by concurrent clients, counts polled until
 * they reach a target (in Postgres, in Temporal), the machine quiet again between phases, and CPU by group.
 */
import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { type BenchDevServer, countWorkflows } from '../engine-devserver.js';
import { cpuMark, type CpuMark, cpuSplit, type CpuSplit, type TreeSampler } from '../engine-procs.js';
import { round, sleep, stat } from '../util.js';
import { log, N, NAMESPACE, POLL_MS, QUIET_PERCENT, TEMPORAL_POLL_MS, TEMPORAL_WAIT_MS, WAIT_MS } from './settings.js';

export interface Fired {
  ms: number;
  perSecond: number;
  latency: ReturnType<typeof stat>;
  /** Requests answered 429/503 or refused, then sent again. */
  retries: number;
}

export class Refused extends Error {}

/** `n` requests by `clients` concurrent clients, each taking the next index; a refused one is sent again. */
export async function fire(n: number, clients: number, request: (i: number) => Promise<void>): Promise<Fired> {
  let next = 0;
  let retries = 0;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(clients, n) }, async () => {
      for (let i = next++; i < n; i = next++) {
        for (let attempt = 1; ; attempt++) {
          const t = performance.now();
          try {
            await request(i);
            latencies.push(performance.now() - t);
            break;
          } catch (err) {
            if (!(err instanceof Refused) || attempt >= 10) throw err;
            retries++;
            await sleep(50 * attempt);
          }
        }
      }
    }),
  );
  const ms = performance.now() - t0;
  return { ms: round(ms), perSecond: round((n / ms) * 1000), latency: stat(latencies), retries };
}

export interface Reached {
  /** From the phase's start until the count reached the target; null if it did not within the wait. */
  ms: number | null;
  perSecond: number | null;
  /** The last count read. */
  count: number;
}

/** Reads `read()` every `pollMs` until it reaches `target`; the time is counted from `t0`. */
export async function reach(
  what: string,
  t0: number,
  target: number,
  read: () => Promise<number>,
  o: { pollMs: number; timeoutMs: number; required: boolean },
): Promise<Reached> {
  let lastLog = performance.now();
  let count = 0;
  for (;;) {
    count = await read();
    const now = performance.now();
    if (count >= target) {
      const ms = now - t0;
      return { ms: round(ms), perSecond: round((target / ms) * 1000), count };
    }
    if (now - t0 > o.timeoutMs) {
      if (o.required) throw new Error(`${what}: ${count} of ${target} after ${round((now - t0) / 1000)} s`);
      log(`${what}: ${count} of ${target} after ${round((now - t0) / 1000)} s; going on`);
      return { ms: null, perSecond: null, count };
    }
    if (now - lastLog > 10_000) {
      log(`  ${what}: ${count} of ${target} after ${round((now - t0) / 1000)} s`);
      lastLog = now;
    }
    await sleep(o.pollMs);
  }
}

export const inPostgres = (what: string, t0: number, read: () => Promise<number>) =>
  reach(what, t0, N, read, { pollMs: POLL_MS, timeoutMs: WAIT_MS, required: true });

/** The processes the bench starts, set as they start: their CPU is counted by group (`Context.groups`). */
export const benchProcesses: { service?: ChildProcess; baselineWorker?: ChildProcess } = {};

export interface Context {
  work: string;
  cli: string;
  dev: BenchDevServer;
  /** The service's Postgres cluster, as its superuser (measuring and the baseline's database only). */
  pgBase: string;
  serviceSampler: TreeSampler;
  groups: () => Record<string, number | undefined>;
  /** The local endpoint both sides call in phase d, and how many calls it has answered. */
  endpoint: { url: string; calls: () => number };
}

export const counter = (ctx: Context, query: string) => () =>
  countWorkflows(ctx.cli, ctx.dev.address, NAMESPACE, query);
/**
 * Until `temporal workflow count -q <query>` shows N more executions than `offset` (those from before the
 * phase: the warm-up's, an earlier phase's); the count reported is the phase's own.
 */
export const inTemporal = (ctx: Context, what: string, t0: number, query: string, offset: number) =>
  reach(what, t0, N, async () => (await counter(ctx, query)()) - offset, {
    pollMs: TEMPORAL_POLL_MS,
    timeoutMs: TEMPORAL_WAIT_MS,
    required: false,
  });
export const RUNNING = (type: string) => `WorkflowType='${type}' AND ExecutionStatus='Running'`;
export const COMPLETED = (type: string) => `WorkflowType='${type}' AND ExecutionStatus='Completed'`;

/**
 * Until the service, its Postgres, the baseline worker and the dev server are quiet again (together under
 * QUIET_PERCENT of one core over a second): work a phase left queued (the instance workflows' first tasks, the
 * relay's signals) is done before the next phase is measured. The time is counted from `t0` to the start of
 * the first quiet second; null if they were not quiet within BENCH_ENGINE_TEMPORAL_WAIT_MS.
 */
export async function quiet(ctx: Context, what: string, t0: number): Promise<number | null> {
  for (;;) {
    const from = cpuMark();
    await sleep(1000);
    const split = cpuSplit(from, cpuMark(), ctx.groups());
    const busy = Object.entries(split.percent)
      .filter(([group]) => group !== 'bench')
      .reduce((sum, [, p]) => sum + p, 0);
    if (busy < QUIET_PERCENT) return round(from.at - t0);
    if (performance.now() - t0 > TEMPORAL_WAIT_MS) {
      log(`${what}: still busy (${Math.round(busy)}% of a core) after ${round((performance.now() - t0) / 1000)} s`);
      return null;
    }
  }
}

export async function queryCount(db: pg.Client, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}

export function cpuOf(ctx: Context, from: CpuMark): CpuSplit {
  return cpuSplit(from, cpuMark(), ctx.groups());
}
