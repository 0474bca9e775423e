import { AsyncLocalStorage } from 'node:async_hooks';
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type pg from 'pg';
import { cpuBetween, cpuSnapshot } from './cpu.js';
import type { SizeResult } from './report.js';
import { mb, round, stat } from './util.js';

// ---------------------------------------------------------------------------------------------------
// Instrumentation (bench only): activity wall time, SQL time per statement, CPU per process

export interface ActivityStore {
  sqlMs: number;
  queries: number;
}
export const activityContext = new AsyncLocalStorage<ActivityStore>();
export const activityRecords: { type: string; wallMs: number; sqlMs: number; queries: number }[] = [];
export const sqlStats = {
  worker: new Map<string, { n: number; ms: number }>(),
  api: new Map<string, { n: number; ms: number }>(),
};

export function statementLabel(query: unknown): string {
  const text = typeof query === 'string' ? query : ((query as { text?: string } | null)?.text ?? '?');
  return text.replace(/\s+/g, ' ').trim().slice(0, 90);
}

export function recordQuery(label: string, ms: number, store: ActivityStore | undefined): void {
  const map = store ? sqlStats.worker : sqlStats.api;
  const s = map.get(label) ?? { n: 0, ms: 0 };
  s.n++;
  s.ms += ms;
  map.set(label, s);
  if (store) {
    store.sqlMs += ms;
    store.queries++;
  }
}

export function timed(args: unknown[], run: () => Promise<unknown>): Promise<unknown> {
  const store = activityContext.getStore();
  const label = statementLabel(args[0]);
  const started = performance.now();
  return run().finally(() => recordQuery(label, performance.now() - started, store));
}

/**
 * Times every promise-style query of the service pool, on the pool (so pool waits count) and on checked
 * out clients (transactions). pg-pool's own callback-style client.query inside pool.query is skipped, so
 * nothing is counted twice. A query made inside an activity is charged to that activity.
 */
export function instrumentPool(pool: pg.Pool): void {
  const poolQuery = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
  (pool as any).query = (...args: unknown[]) =>
    typeof args[args.length - 1] === 'function' ? poolQuery(...args) : timed(args, () => poolQuery(...args));
  pool.on('connect', (client) => {
    const clientQuery = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>;
    (client as any).query = (...args: unknown[]) =>
      typeof args[args.length - 1] === 'function' ? clientQuery(...args) : timed(args, () => clientQuery(...args));
  });
}

export const timingInterceptor: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      const store: ActivityStore = { sqlMs: 0, queries: 0 };
      const started = performance.now();
      try {
        return await activityContext.run(store, () => next(input));
      } finally {
        activityRecords.push({
          type: ctx.info.activityType,
          wallMs: performance.now() - started,
          sqlMs: store.sqlMs,
          queries: store.queries,
        });
      }
    },
  },
});

export function sqlTable(map: Map<string, { n: number; ms: number }>) {
  return [...map.entries()]
    .map(([statement, s]) => ({ statement, n: s.n, totalMs: round(s.ms), meanMs: round(s.ms / s.n, 2) }))
    .sort((a, b) => b.totalMs - a.totalMs)
    .slice(0, 12);
}

// ---------------------------------------------------------------------------------------------------
// Around a plan: what its activities did, WAL written, and memory, CPU and event loop sampled

/** Each activity type's wall time, time in SQL and statements, from what the timing interceptor recorded. */
export function activityBreakdown(): SizeResult['breakdown']['activities'] {
  const activities: SizeResult['breakdown']['activities'] = {};
  for (const type of [...new Set(activityRecords.map((a) => a.type))]) {
    const of = activityRecords.filter((a) => a.type === type);
    activities[type] = {
      ...stat(of.map((a) => a.wallMs)),
      sqlMs: round(of.reduce((s, a) => s + a.sqlMs, 0)),
      queries: of.reduce((s, a) => s + a.queries, 0),
    };
  }
  return activities;
}

export async function walLsn(db: pg.Pool): Promise<string | null> {
  const { rows } = await db
    .query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')
    .catch(() => ({ rows: [] as { lsn: string }[] }));
  return rows[0]?.lsn ?? null;
}

export async function walMbSince(db: pg.Pool, from: string | null): Promise<number | null> {
  if (from === null) return null;
  const { rows } = await db.query<{ bytes: string }>(
    'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS bytes',
    [from],
  );
  return mb(Number(rows[0]!.bytes));
}

/** Memory, CPU and event loop sampled while the plan runs; `stop()` returns what was seen. */
export function startSampling() {
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  let heapPeak = process.memoryUsage().heapUsed;
  let samples = 0;
  const timeline: { s: number; rssMb: number; heapUsedMb: number }[] = [];
  const from = performance.now();
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    rssPeak = Math.max(rssPeak, m.rss);
    heapPeak = Math.max(heapPeak, m.heapUsed);
    if (samples++ % 20 === 0)
      timeline.push({ s: round((performance.now() - from) / 1000), rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed) });
  }, 50);
  // heapUsed just after each major GC: the live set, whatever the GC's timing (the peaks above are not).
  const afterMajorGc: number[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if ((e as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
        afterMajorGc.push(process.memoryUsage().heapUsed);
      }
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const cpu0 = cpuSnapshot();
  return {
    stop() {
      const cpu = cpuBetween(cpu0, cpuSnapshot());
      loopDelay.disable();
      clearInterval(sampler);
      gcObserver.disconnect();
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      const afterPlanGc = gc ? process.memoryUsage() : undefined;
      const memory = {
        rssBeforePlanMb: mb(rssBefore),
        rssPeakDuringPlanMb: mb(rssPeak),
        heapUsedPeakDuringPlanMb: mb(heapPeak),
        samples,
        liveHeapAfterMajorGcMb: {
          max: afterMajorGc.length ? mb(Math.max(...afterMajorGc)) : null,
          last: afterMajorGc.length ? mb(afterMajorGc[afterMajorGc.length - 1]!) : null,
          majorGcs: afterMajorGc.length,
        },
        afterPlanFullGc: afterPlanGc ? { heapUsedMb: mb(afterPlanGc.heapUsed), rssMb: mb(afterPlanGc.rss) } : null,
        timeline,
        maxRssAfterPlanMb: mb(process.resourceUsage().maxRSS * 1024),
      };
      const eventLoopDelay = {
        p50Ms: round(loopDelay.percentile(50) / 1e6),
        p99Ms: round(loopDelay.percentile(99) / 1e6),
        maxMs: round(loopDelay.max / 1e6),
      };
      return { cpu, memory, eventLoopDelay };
    },
  };
}
