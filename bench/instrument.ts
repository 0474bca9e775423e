import { AsyncLocalStorage } from 'node:async_hooks';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type pg from 'pg';
import { round } from './util.js';

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
