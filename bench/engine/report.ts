/**
 * What the engine bench reports: the ratios of the service to the baseline, the targets they are held to
 * (reported, not enforced), the commit measured, and the table printed at the end.
 */
import { execFileSync } from 'node:child_process';
import type { HeapSample } from '../engine-heap.js';
import type { CpuSplit } from '../engine-procs.js';
import { round } from '../util.js';
import type { runBaseline } from './baseline.js';
import type { runService } from './phases.js';
import { CALLS, CLIENTS, INSTANCE_TYPE, ROOT } from './settings.js';

/** HEAD, and the last commit that changed the engine (src/, workflows/, activities/). */
export function commit(): string {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    const head = git('rev-parse', '--short', 'HEAD');
    const engine = git('log', '-1', '--format=%h', '--', 'src', 'workflows', 'activities');
    const hash = engine === head ? head : `${head} (engine last changed in ${engine})`;
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'workflows', 'activities'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    return dirty ? `${hash} (with uncommitted changes in src/, workflows/ or activities/)` : hash;
  } catch {
    return '?';
  }
}

const ratio = (x: number | null | undefined, y: number | null | undefined) =>
  x != null && y != null && y > 0 ? round(x / y, 2) : null;

/** The service's rates over the baseline's, phase by phase. */
export function ratiosOf(
  baseline: Awaited<ReturnType<typeof runBaseline>>,
  service: Awaited<ReturnType<typeof runService>>,
) {
  return {
    starts: ratio(service.a.starts.perSecond, baseline.starts.perSecond),
    toWaiting: ratio(service.a.waiting.perSecond, baseline.waiting.perSecond),
    toDone: ratio(service.b.finished.perSecond, baseline.done.perSecond),
    calls: ratio(service.d?.done.perSecond, baseline.calls?.done.perSecond),
  };
}

/** The engine's targets, each with its figure and whether it was met. */
export function targetsOf(
  service: Awaited<ReturnType<typeof runService>>,
  ratios: ReturnType<typeof ratiosOf>,
  memory: { peakNodeMb: number },
) {
  return [
    {
      name: 'service starts >= 0.8x baseline (accepted/s vs starts/s)',
      value: ratios.starts,
      pass: (ratios.starts ?? 0) >= 0.8,
    },
    {
      name: 'service instance runs to the wait >= 0.8x baseline (instances/s)',
      value: ratios.toWaiting,
      pass: (ratios.toWaiting ?? 0) >= 0.8,
    },
    {
      name: 'service instance runs resumed to the end >= 0.8x baseline (instances/s)',
      value: ratios.toDone,
      pass: (ratios.toDone ?? 0) >= 0.8,
    },
    ...(CALLS
      ? [
          {
            name: 'service instances with one outbound call, started to Finished >= 0.8x baseline (instances/s)',
            value: ratios.calls,
            pass: (ratios.calls ?? 0) >= 0.8,
          },
        ]
      : []),
    { name: 'trigger answers < 1 s (ms)', value: service.b.trigger.ms, pass: service.b.trigger.ms < 1000 },
    {
      name: 'ScheduleActivity plan takes effect >= 5,000 instances/s',
      value: service.c.setVariable.perSecond,
      pass: (service.c.setVariable.perSecond ?? 0) >= 5000,
    },
    ...(service.burst
      ? [
          {
            name: 'ScheduleActivity plan right after N starts <= 1.25x the plan when Temporal is idle',
            value: service.burst.ratio,
            pass: service.burst.ratio !== null && service.burst.ratio <= 1.25,
          },
        ]
      : []),
    {
      name: 'peak RSS <= 300 MB (service node process, phases a-c)',
      value: memory.peakNodeMb,
      pass: memory.peakNodeMb <= 300,
    },
  ];
}

// ---------------------------------------------------------------------------------------------------
// The table

const s = (ms: number | null | undefined) => (ms == null ? 'not reached' : `${round(ms / 1000, 2)} s`);
const rate = (r: number | null | undefined) => (r == null ? '-' : `${Math.round(r).toLocaleString('en-US')}/s`);
const x = (r: number | null) => (r == null ? '-' : `${r}x`);

/** The node process's memory at each phase's largest RSS, as its /metrics split it. */
function heapLines(byPhase: Record<string, HeapSample> | undefined): string[] {
  const phases = Object.entries(byPhase ?? {});
  if (phases.length === 0) return [];
  return [
    "Service node memory at each phase's largest RSS (MB; /metrics): RSS = V8 heap total (used) + external + native",
    ...phases.map(
      ([label, h]) =>
        `  ${label.padEnd(25)} ${h.rssMb} = ${h.heapTotalMb} (${h.heapUsedMb}) + ${h.externalMb} + ${h.nativeMb}`,
    ),
  ];
}

export function printTable(r: any): void {
  const b = r.baseline;
  const v = r.service;
  const rows: [string, string, string, string][] = [];
  const row = (label: string, base: string, service: string, ratioText = '') =>
    rows.push([label, base, service, ratioText]);
  row('', 'baseline (bare Temporal)', 'service', 'service/baseline');
  row(
    `starts accepted (${CLIENTS} clients)`,
    `${s(b.starts.ms)}  ${rate(b.starts.perSecond)}`,
    `${s(v.a.starts.ms)}  ${rate(v.a.starts.perSecond)}`,
    x(r.ratios.starts),
  );
  row(
    '  request p50 / p95 / max',
    `${b.starts.latency.medianMs} / ${b.starts.latency.p95Ms} / ${b.starts.latency.maxMs} ms`,
    `${v.a.starts.latency.medianMs} / ${v.a.starts.latency.p95Ms} / ${v.a.starts.latency.maxMs} ms`,
  );
  row(
    'all N waiting (signal / event)',
    `${s(b.waiting.ms)}  ${rate(b.waiting.perSecond)}`,
    `${s(v.a.waiting.ms)}  ${rate(v.a.waiting.perSecond)}`,
    x(r.ratios.toWaiting),
  );
  row(
    '  Temporal: N workflows Running',
    `${s(b.temporalRunning.ms)} (${b.temporalRunning.count})`,
    `${s(v.a.temporalRunning.ms)} (${v.a.temporalRunning.count})`,
  );
  row('  quiet again (all but the bench)', s(b.startQuietMs), s(v.a.quietMs));
  row(
    'resume: N signals / one trigger',
    `${s(b.signals.ms)}  ${rate(b.signals.perSecond)}`,
    `${v.b.trigger.ms} ms (${v.b.trigger.resumed} resumed)`,
  );
  row(
    'all N done (row updated / Finished)',
    `${s(b.done.ms)}  ${rate(b.done.perSecond)}`,
    `${s(v.b.finished.ms)}  ${rate(v.b.finished.perSecond)}`,
    x(r.ratios.toDone),
  );
  row(
    '  Temporal: N workflows Completed',
    `${s(b.temporalCompleted.ms)} (${b.temporalCompleted.count})`,
    `${s(v.b.temporalCompleted.ms)} (${v.b.temporalCompleted.count})`,
  );
  row('  quiet again', s(b.resumeQuietMs), s(v.b.quietMs));
  row('second batch: starts accepted', '', `${s(v.c.starts.ms)}  ${rate(v.c.starts.perSecond)}`);
  row('  all N waiting', '', `${s(v.c.waiting.ms)}  ${rate(v.c.waiting.perSecond)}`);
  row('  Temporal: N Running', '', `${s(v.c.temporalRunning.ms)} (${v.c.temporalRunning.count})`);
  row('  quiet again', '', s(v.c.quietMs));
  row('plan ScheduleActivity set: submit', '', `${v.c.plan.submitMs} ms`);
  row('  plan Completed', '', `${s(v.c.plan.ms)} (status ${v.c.plan.status}, ${v.c.plan.outcome})`);
  const h = v.c.plan.temporal;
  if (h)
    row(
      '  its batches: n, queued / ran (median)',
      '',
      `${h.batchStartToClose.n}, ${h.batchScheduleToStart.medianMs} / ${h.batchStartToClose.medianMs} ms; batch phase ${s(h.batchPhaseMs)}`,
    );
  row('  SetVariable ran on all N', '', `${s(v.c.setVariable.ms)}  ${rate(v.c.setVariable.perSecond)}`);
  row('  quiet again', '', s(v.c.quietMsAfterPlan));
  if (v.burst) {
    row('c.burst: N more starts accepted', '', `${s(v.burst.starts.ms)}  ${rate(v.burst.starts.perSecond)}`);
    row(
      '  the same plan: SetVariable on all N',
      '',
      `${s(v.burst.setVariable.ms)}  ${rate(v.burst.setVariable.perSecond)}`,
      v.burst.ratio === null ? '' : `${v.burst.ratio}x idle`,
    );
    row('  outbox rows waiting at its submit', '', String(v.burst.outboxAtSubmit));
    const bh = v.burst.temporal;
    if (bh)
      row(
        '  its batches: n, queued / ran (median)',
        '',
        `${bh.batchStartToClose.n}, ${bh.batchScheduleToStart.medianMs} / ${bh.batchStartToClose.medianMs} ms; batch phase ${s(bh.batchPhaseMs)}`,
      );
  }
  if (v.d && b.calls) {
    row(
      `d. one outbound call: ${r.settings.callN} started`,
      `${s(b.calls.starts.ms)}  ${rate(b.calls.starts.perSecond)}`,
      `${s(v.d.starts.ms)}  ${rate(v.d.starts.perSecond)}`,
    );
    row(
      '  all called and done (row / Finished)',
      `${s(b.calls.done.ms)}  ${rate(b.calls.done.perSecond)}`,
      `${s(v.d.done.ms)}  ${rate(v.d.done.perSecond)}`,
      x(r.ratios.calls),
    );
    row(
      '  calls the endpoint answered',
      String(b.calls.endpointCalls),
      `${v.d.endpointCalls} (faulted ${v.d.faulted})`,
    );
  }
  row('peak RSS, phases a-c: node', `${b.workerPeakRssMb} MB (worker)`, `${r.memory.peakNodeMb} MB`);
  row('  postgres (PSS) / service tree', '', `${r.memory.peakPostgresPssMb} MB / ${r.memory.peakTreeMb} MB`);
  const phasePeaks = Object.entries(r.memory.byPhase as Record<string, { nodeMb: number }>)
    .map(([phase, p]) => `${phase} ${Math.round(p.nodeMb)}`)
    .join(', ');
  const cpuText = (c: CpuSplit) =>
    `${Object.entries(c.percent)
      .filter(([, p]) => p >= 1)
      .map(([k, p]) => `${k} ${Math.round(p)}%`)
      .join(', ')}; others ${c.othersPercent == null ? '?' : Math.round(c.othersPercent)}%`;
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((rr) => rr[i]!.length)));
  const lines = [
    '',
    `Engine bench: N = ${r.settings.n}, ${CLIENTS} clients, dev server SQLite ${r.settings.devServer.mode}, commit ${r.commit}`,
    `${r.machine.cpus} cores (${r.machine.cpuModel}), Node ${r.machine.node}`,
    '',
    ...rows.map((rr) => rr.map((c, i) => (i === 0 ? c.padEnd(widths[0]!) : c.padStart(widths[i]!))).join('   ')),
    '',
    `Service node RSS peak by phase (MB): ${phasePeaks}`,
    ...heapLines(r.memory.heapByPhase),
    '',
    'CPU (% of one core):',
    `  baseline starts:  ${cpuText(b.cpu.start)}`,
    `  baseline signals: ${cpuText(b.cpu.resume)}`,
    `  service a:        ${cpuText(v.a.cpu)}`,
    `  service b:        ${cpuText(v.b.cpu)}`,
    `  service c starts: ${cpuText(v.c.startCpu)}`,
    `  service c plan:   ${cpuText(v.c.cpu)}`,
    '',
    `Temporal at the end: ${r.temporalAtEnd.instanceExecution} ${INSTANCE_TYPE} executions (${r.temporalAtEnd.running} Running, ${r.temporalAtEnd.completed} Completed)`,
    `Service log: ${r.serviceLog.warnings} warnings, ${r.serviceLog.errors} errors${r.serviceLog.messages.length ? ` (${r.serviceLog.messages.join('; ')})` : ''}`,
    `API check: a ${v.a.apiSuspended} Running/Suspended, b ${v.b.apiFinished} Finished, c ${v.c.apiSuspended} Running/Suspended; SetVariable activity records Completed in c: ${v.c.activityRecordsCompleted}`,
    '',
    'Targets (reported, not enforced):',
    ...r.targets.map(
      (t: { name: string; value: unknown; pass: boolean }) => `  ${t.pass ? 'PASS' : 'FAIL'}  ${t.name}: ${t.value}`,
    ),
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
}
