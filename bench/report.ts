import path from 'node:path';
import type { cpuBetween } from './cpu.js';
import { round, type Stat } from './util.js';

export type { Stat } from './util.js';

// ---------------------------------------------------------------------------------------------------
// Shapes of the results

export interface SizeResult {
  n: number;
  /** Plan jobs recorded before-images (false: BENCH_RECORD_UNDO=0, to measure their cost). */
  recordUndo?: boolean;
  /**
   * The plan ran on the rows as inserted (BENCH_FRESH_PAGES=1), not written once more and vacuumed first as the
   * floor's runs find them; absent before 2026-11-27, when every plan ran on the inserted rows.
   */
  freshPages?: boolean;
  /** Seeded with random instance ids (BENCH_RANDOM_IDS=1) rather than ids shaped as the service's (UUIDv7). */
  randomIds?: boolean;
  undo?: {
    bytesPerJob: number;
    revert: { ms: number; instancesPerSecond: number; restored: number; ok: boolean } | null;
  };
  seedMs: number;
  plan: {
    planId: string;
    /** POST /alterations/submit -> the plan's end seen by its watcher (event stream `done`, or a poll). */
    ms: number;
    submitMs: number;
    instancesPerSecond: number;
    /** From the plan row: created_at -> started_at (workflow start until generateJobs ran) and -> completed_at. */
    serverSide: { createdToStartedMs: number; createdToCompletedMs: number };
    verified: { instancesAltered: number; jobsCompleted: number; jobTotal: number; ok: boolean };
    /** How the bench watched the plan: its event stream's events, or its status reads (`BENCH_WAIT=poll`). */
    watch: Stat & { via: 'events' | 'poll' };
  };
  raw: { ms: number; runsMs?: number[]; rows: number; verified: number; ok: boolean };
  ratio: number;
  dryRun: {
    medianMs: number;
    runsMs: number[];
    count: number;
    ok: boolean;
    countOnlyMedianMs?: number;
    /** The same, read by a client in a process of its own over HTTP (bench/dry-run-client.ts). */
    overHttp?: { medianMs: number; runsMs: number[]; countOnlyMedianMs: number; countOnlyMs: number[]; ok: boolean };
  };
  memory: {
    rssBeforePlanMb: number;
    rssPeakDuringPlanMb: number;
    heapUsedPeakDuringPlanMb: number;
    samples: number;
    /** heapUsed right after the major GCs during the plan: the live set, independent of when the GC runs. */
    liveHeapAfterMajorGcMb: { max: number | null; last: number | null; majorGcs: number };
    /** A full GC forced once the plan completed: what the process still holds. */
    afterPlanFullGc: { heapUsedMb: number; rssMb: number } | null;
    /** One sample a second during the plan. */
    timeline: { s: number; rssMb: number; heapUsedMb: number }[];
    /** process.resourceUsage().maxRSS right after the plan (covers start, seed and the plan). */
    maxRssAfterPlanMb: number;
    /** ... and at the end of the size (also covers the dry-runs, which hold all N ids). */
    maxRssAtEndMb: number;
  };
  temporal: {
    runs: number;
    maxHistoryEvents: number;
    historyEvents: number[];
    batchScheduleToStart: Stat;
    batchStartToClose: Stat;
    workflowTasks: Stat;
    /**
     * Sum of batch start-to-close over (slots x batch phase span), slots = min(window, batch worker slots): 1
     * means a batch always in every slot that can run one.
     */
    windowUtilisation: number;
    slots?: number;
    batchPhaseMs: number;
  };
  breakdown: {
    activities: Record<string, Stat & { sqlMs: number; queries: number }>;
    /** Worker SQL by statement: total ms, count (client-side: includes pg's row parsing and pool waits). */
    workerSql: { statement: string; n: number; totalMs: number; meanMs: number }[];
    apiSql: { statement: string; n: number; totalMs: number; meanMs: number }[];
    cpu: ReturnType<typeof cpuBetween>;
    /** WAL written while the plan ran, and while the raw UPDATE ran (cluster-wide). */
    walMb: { plan: number | null; raw: number | null };
    eventLoopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  };
}

export interface BenchResults {
  date: string;
  command: string;
  machine: { cpus: number; cpuModel: string; memTotalGb: number; node: string; platform: string };
  config: {
    batchSize: number;
    window: number;
    batchesPerRun: number;
    pollMs: number;
    /** How the bench learns that a plan ended (BENCH_WAIT). */
    waitVia: 'events' | 'poll';
    postgres: string;
    temporal: string;
  };
  sizes: SizeResult[];
  targets: { name: string; ok: boolean; detail: string }[];
}

export function evaluateTargets(sizes: SizeResult[]): BenchResults['targets'] {
  const targets: BenchResults['targets'] = [];
  for (const s of sizes) {
    targets.push({
      name: `N=${s.n}: >= 10,000 instances/s through a plan`,
      ok: s.plan.instancesPerSecond >= 10_000,
      detail: `${s.plan.instancesPerSecond}/s`,
    });
    targets.push({ name: `N=${s.n}: plan within 5x of the raw UPDATE`, ok: s.ratio <= 5, detail: `${s.ratio}x` });
    targets.push({
      name: `N=${s.n}: dry-run < 1 s`,
      ok: s.dryRun.medianMs < 1000,
      detail: `${s.dryRun.medianMs} ms median`,
    });
    if (s.dryRun.countOnlyMedianMs !== undefined)
      targets.push({
        name: `N=${s.n}: dry-run countOnly < 150 ms`,
        ok: s.dryRun.countOnlyMedianMs < 150,
        detail: `${s.dryRun.countOnlyMedianMs} ms median${s.dryRun.overHttp ? `, ${s.dryRun.overHttp.countOnlyMedianMs} ms over HTTP` : ''}`,
      });
    targets.push({
      name: `N=${s.n}: verified (all instances altered, all jobs Completed, raw UPDATE all rows, dry-run count)`,
      ok: s.plan.verified.ok && s.raw.ok && s.dryRun.ok,
      detail: `${s.plan.verified.instancesAltered}/${s.n} altered, ${s.plan.verified.jobsCompleted}/${s.n} jobs, raw ${s.raw.verified}/${s.n}, dry-run ${s.dryRun.count}${s.dryRun.overHttp && !s.dryRun.overHttp.ok ? ', over HTTP: a count was wrong' : ''}`,
    });
  }
  if (sizes.length >= 2) {
    const small = sizes.reduce((a, b) => (a.n <= b.n ? a : b));
    const large = sizes.reduce((a, b) => (a.n >= b.n ? a : b));
    const growth = large.memory.rssPeakDuringPlanMb / small.memory.rssPeakDuringPlanMb;
    targets.push({
      name: `memory flat as N grows: peak RSS during the plan at N=${large.n} within 1.25x of N=${small.n}`,
      ok: growth <= 1.25,
      detail: `${small.memory.rssPeakDuringPlanMb} MB -> ${large.memory.rssPeakDuringPlanMb} MB (${round(growth, 2)}x)`,
    });
    const liveSmall = small.memory.afterPlanFullGc?.heapUsedMb;
    const liveLarge = large.memory.afterPlanFullGc?.heapUsedMb;
    if (liveSmall !== undefined && liveLarge !== undefined) {
      targets.push({
        name: `memory flat as N grows: heap held after the plan (full GC) at N=${large.n} within 1.25x of N=${small.n}`,
        ok: liveLarge <= 1.25 * liveSmall,
        detail: `${liveSmall} MB -> ${liveLarge} MB (${round(liveLarge / liveSmall, 2)}x)`,
      });
    }
  }
  return targets;
}

export const pct = (v: number | null, of: number) => (v === null ? 'n/a' : `${Math.round((100 * v) / of)}%`);

export function printTable(results: BenchResults, file: string): void {
  const sizes = results.sizes;
  const rows: [string, (s: SizeResult) => string][] = [
    ['seed: INSERT ... generate_series', (s) => `${round(s.seedMs / 1000, 2)} s`],
    ['plan: submit -> status 4', (s) => `${round(s.plan.ms / 1000, 2)} s`],
    ['  instances/s through the plan', (s) => String(s.plan.instancesPerSecond)],
    [
      '  server side: created -> started / completed',
      (s) => `${s.plan.serverSide.createdToStartedMs} / ${s.plan.serverSide.createdToCompletedMs} ms`,
    ],
    ['  submit request', (s) => `${s.plan.submitMs} ms`],
    // Everything but the batches: submit, generation, the first workflow task, completion, seeing the end.
    ['  fixed costs: plan - batch phase', (s) => `${round(s.plan.ms - s.temporal.batchPhaseMs)} ms`],
    [
      '  watched by: events or polls (n, median ms apart / per read)',
      (s) => `${s.plan.watch.via}, ${s.plan.watch.n}, ${s.plan.watch.medianMs}`,
    ],
    [
      '  verified: altered / jobs status 2',
      (s) => `${s.plan.verified.instancesAltered} / ${s.plan.verified.jobsCompleted}`,
    ],
    ['before-images: bytes per job', (s) => (s.recordUndo === false ? 'off' : `${s.undo?.bytesPerJob ?? '-'} B`)],
    [
      'revert plan: time (instances/s)',
      (s) =>
        s.undo?.revert
          ? `${round(s.undo.revert.ms / 1000, 2)} s (${s.undo.revert.instancesPerSecond})${s.undo.revert.ok ? '' : ' NOT VERIFIED'}`
          : '-',
    ],
    [
      'raw UPDATE (floor; median of runs)',
      (s) =>
        `${round(s.raw.ms / 1000, 2)} s${s.raw.runsMs && s.raw.runsMs.length > 1 ? ` (${s.raw.runsMs.map((m) => round(m / 1000, 2)).join(' / ')})` : ''}`,
    ],
    ['ratio plan / raw UPDATE', (s) => `${s.ratio}x`],
    ['dry-run median (count)', (s) => `${s.dryRun.medianMs} ms (${s.dryRun.count})`],
    ['dry-run countOnly median', (s) => `${s.dryRun.countOnlyMedianMs ?? '-'} ms`],
    [
      'dry-run over HTTP, another process (count only)',
      (s) => (s.dryRun.overHttp ? `${s.dryRun.overHttp.medianMs} ms (${s.dryRun.overHttp.countOnlyMedianMs} ms)` : '-'),
    ],
    ['RSS before plan / peak during plan', (s) => `${s.memory.rssBeforePlanMb} / ${s.memory.rssPeakDuringPlanMb} MB`],
    [
      'heapUsed peak / live after major GC (max, n)',
      (s) => {
        const g = s.memory.liveHeapAfterMajorGcMb;
        return `${s.memory.heapUsedPeakDuringPlanMb} / ${g.max ?? '-'} MB (${g.majorGcs})`;
      },
    ],
    [
      'after the plan, forced full GC: heapUsed / RSS',
      (s) =>
        s.memory.afterPlanFullGc
          ? `${s.memory.afterPlanFullGc.heapUsedMb} / ${s.memory.afterPlanFullGc.rssMb} MB`
          : '-',
    ],
    ['maxRSS after plan / at end', (s) => `${s.memory.maxRssAfterPlanMb} / ${s.memory.maxRssAtEndMb} MB`],
    ['Temporal runs / longest history', (s) => `${s.temporal.runs} / ${s.temporal.maxHistoryEvents} events`],
    ['generateJobs activity', (s) => `${s.breakdown.activities.generateJobs?.totalMs ?? '-'} ms`],
    [
      'runJobBatch: count, median, p95',
      (s) => {
        const b = s.breakdown.activities.runJobBatch;
        return b ? `${b.n}, ${b.medianMs}, ${b.p95Ms} ms` : '-';
      },
    ],
    [
      '  of which in SQL (incl. row parsing)',
      (s) => {
        const b = s.breakdown.activities.runJobBatch;
        return b ? `${Math.round((100 * b.sqlMs) / b.totalMs)} %` : '-';
      },
    ],
    ['  schedule-to-start median', (s) => `${s.temporal.batchScheduleToStart.medianMs} ms`],
    [
      '  batch slots busy (of min(window, slots))',
      (s) => `${Math.round(s.temporal.windowUtilisation * 100)} % of ${s.temporal.slots ?? '?'}`,
    ],
    [
      'CPU in plan: node / postgres / temporal',
      (s) => {
        const c = s.breakdown.cpu;
        return `${pct(c.nodeMs, c.wallMs)} / ${pct(c.postgresMs, c.wallMs)} / ${pct(c.temporalMs, c.wallMs)} of ${c.cores * 100}%`;
      },
    ],
    [
      '  machine busy / iowait / other processes',
      (s) => {
        const c = s.breakdown.cpu;
        return `${pct(c.systemBusyMs, c.wallMs)} / ${pct(c.iowaitMs, c.wallMs)} / ${pct(c.othersMs, c.wallMs)}`;
      },
    ],
    ['WAL written: plan / raw UPDATE', (s) => `${s.breakdown.walMb.plan ?? '-'} / ${s.breakdown.walMb.raw ?? '-'} MB`],
    [
      '  WAL per altered instance: plan / raw',
      (s) =>
        `${s.breakdown.walMb.plan === null ? '-' : Math.round((s.breakdown.walMb.plan * 1024 * 1024) / s.n)} / ` +
        `${s.breakdown.walMb.raw === null ? '-' : Math.round((s.breakdown.walMb.raw * 1024 * 1024) / s.n)} B`,
    ],
    [
      'event loop delay p99 / max',
      (s) => `${s.breakdown.eventLoopDelay.p99Ms} / ${s.breakdown.eventLoopDelay.maxMs} ms`,
    ],
  ];
  const header = ['', ...sizes.map((s) => `N = ${s.n}${s.recordUndo === false ? ' (no undo)' : ''}`)];
  const table = [header, ...rows.map(([label, f]) => [label, ...sizes.map(f)])];
  const widths = header.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const out = [
    '',
    `Alteration benchmark, ${results.date}: ${results.machine.cpus} cores, node ${results.machine.node}; ` +
      `batchSize ${results.config.batchSize}, window ${results.config.window}, batchesPerRun ${results.config.batchesPerRun}, ${results.config.waitVia === 'poll' ? `poll ${results.config.pollMs} ms` : 'watched by event stream'}`,
    '',
    line(table[0]!),
    ...table.slice(1).map(line),
    ...sizes
      .filter((s) => s.breakdown.cpu.othersMs !== null && s.breakdown.cpu.othersMs > 0.1 * s.breakdown.cpu.wallMs)
      .map(
        (s) =>
          `WARNING: other processes used ${pct(s.breakdown.cpu.othersMs, s.breakdown.cpu.wallMs)} CPU during the N=${s.n} plan; its figures are disturbed` +
          ` (busiest: ${s.breakdown.cpu.othersTop.map((o) => `${o.comm} ${o.ms} ms`).join(', ') || 'processes that started meanwhile'}).`,
      ),
    '',
    'Targets:',
    ...results.targets.map((t) => `  ${t.ok ? 'MET   ' : 'MISSED'}  ${t.name}: ${t.detail}`),
    '',
    `Worker SQL at the largest N (client-side ms):`,
    ...(sizes[sizes.length - 1]?.breakdown.workerSql ?? []).map(
      (q) => `  ${String(q.totalMs).padStart(9)} ms  ${String(q.n).padStart(5)}x  ${q.statement}`,
    ),
    '',
    `JSON: ${path.relative(process.cwd(), file)}`,
    '',
  ];
  process.stdout.write(out.join('\n'));
}
