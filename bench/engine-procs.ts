import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { readProcesses, readSystemCpu, ticksPerSecond, type ProcEntry } from './cpu.js';
import { mb, round } from './util.js';

/**
 * The engine bench's process accounting (Linux /proc): the memory of a process tree sampled over time, and
 * the CPU each group of processes used in a phase.
 */

let pageBytes: number | undefined;
function pageSize(): number {
  if (pageBytes === undefined) {
    try {
      pageBytes = Number(execFileSync('getconf', ['PAGESIZE'], { encoding: 'utf8' }).trim()) || 4096;
    } catch {
      pageBytes = 4096;
    }
  }
  return pageBytes;
}

/** Resident set size of a process in bytes (/proc/pid/statm), or 0 if it is gone. */
export function rssBytes(pid: number): number {
  try {
    const resident = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
    return resident * pageSize();
  } catch {
    return 0;
  }
}

/** Proportional set size in bytes (/proc/pid/smaps_rollup): shared pages split between their users. */
export function pssBytes(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** `root` and every process below it, from one snapshot of /proc. */
export function descendants(processes: Map<number, ProcEntry>, root: number): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, e] of processes) {
    const list = children.get(e.ppid) ?? [];
    list.push(pid);
    children.set(e.ppid, list);
  }
  const out: number[] = [];
  const stack = processes.has(root) ? [root] : [];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

export interface TreeMemory {
  /** The node processes of the tree (the service itself; a tsx/esbuild helper is "other"). */
  nodeMb: number;
  /** Postgres processes, RSS summed (shared buffers counted once per process that touched them). */
  postgresRssMb: number;
  /** Postgres processes, PSS summed (shared pages split): what the cluster really holds. */
  postgresPssMb: number;
  otherMb: number;
  /** node + postgres PSS + other. */
  totalMb: number;
  processes: number;
}

export interface MemoryPeaks {
  /** Peak of the node processes' RSS sum. */
  nodeMb: number;
  postgresPssMb: number;
  postgresRssMb: number;
  totalMb: number;
  samples: number;
}

const emptyPeaks = (): MemoryPeaks => ({ nodeMb: 0, postgresPssMb: 0, postgresRssMb: 0, totalMb: 0, samples: 0 });

/**
 * Samples a process tree's memory every `intervalMs` (PSS every `pssEvery`-th sample, being costlier to
 * read), keeping the peaks over the whole run and per labelled phase (`phase(label)`).
 */
export class TreeSampler {
  private timer: NodeJS.Timeout | undefined;
  private n = 0;
  private lastPss = 0;
  private current: string | undefined;
  readonly overall = emptyPeaks();
  readonly byPhase = new Map<string, MemoryPeaks>();
  last: TreeMemory | undefined;
  /** Told each phase as it begins (another sampler following the same phases). */
  onPhase: ((label: string | undefined) => void) | undefined;

  constructor(
    private readonly root: () => number | undefined,
    private readonly intervalMs = 200,
    private readonly pssEvery = 5,
  ) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Samples from now on count towards `label` too (undefined: to no phase). */
  phase(label: string | undefined): void {
    this.onPhase?.(label);
    this.current = label;
    if (label && !this.byPhase.has(label)) this.byPhase.set(label, emptyPeaks());
    this.sample();
  }

  sample(): TreeMemory | undefined {
    const root = this.root();
    if (root === undefined) return undefined;
    const processes = readProcesses();
    const pids = descendants(processes, root);
    if (pids.length === 0) return undefined;
    const withPss = this.n++ % this.pssEvery === 0;
    let node = 0;
    let pgRss = 0;
    let pgPss = 0;
    let other = 0;
    for (const pid of pids) {
      const comm = processes.get(pid)?.comm ?? '';
      if (comm === 'postgres') {
        pgRss += rssBytes(pid);
        if (withPss) pgPss += pssBytes(pid);
      } else if (comm === 'node' || comm === 'MainThread') node += rssBytes(pid);
      else other += rssBytes(pid);
    }
    if (withPss) this.lastPss = pgPss;
    const m: TreeMemory = {
      nodeMb: mb(node),
      postgresRssMb: mb(pgRss),
      postgresPssMb: mb(this.lastPss),
      otherMb: mb(other),
      totalMb: mb(node + this.lastPss + other),
      processes: pids.length,
    };
    this.last = m;
    const update = (p: MemoryPeaks) => {
      p.nodeMb = Math.max(p.nodeMb, m.nodeMb);
      p.postgresRssMb = Math.max(p.postgresRssMb, m.postgresRssMb);
      p.postgresPssMb = Math.max(p.postgresPssMb, m.postgresPssMb);
      p.totalMb = Math.max(p.totalMb, m.totalMb);
      p.samples++;
    };
    update(this.overall);
    if (this.current) update(this.byPhase.get(this.current)!);
    return m;
  }
}

export interface CpuMark {
  at: number;
  processes: Map<number, ProcEntry>;
  system: ReturnType<typeof readSystemCpu>;
}

export const cpuMark = (): CpuMark => ({ at: performance.now(), processes: readProcesses(), system: readSystemCpu() });

/** Groups of processes by the root of their tree; a process counts in the first group whose tree holds it. */
export type CpuGroups = Record<string, number | undefined>;

export interface CpuSplit {
  wallMs: number;
  /** Per group, percent of one core over the phase (200% = both cores of a 2-core machine). */
  percent: Record<string, number>;
  machineBusyPercent: number | null;
  /** Everything busy on the machine outside the groups (other work on a shared machine). */
  othersPercent: number | null;
  othersTop: { pid: number; comm: string; percent: number }[];
}

/**
 * CPU each group used between two marks, in percent of one core. `postgres` processes under a group's root
 * are counted apart as `<group>.postgres`. A process that exited in between is charged to the group of its
 * parent (whose cutime holds it).
 */
export function cpuSplit(a: CpuMark, b: CpuMark, groups: CpuGroups): CpuSplit {
  const wallMs = b.at - a.at;
  const tickMs = 1000 / ticksPerSecond();
  const pct = (ticks: number) => round(((ticks * tickMs) / wallMs) * 100);
  const groupOf = new Map<number, string>();
  for (const snapshot of [a, b]) {
    for (const [name, root] of Object.entries(groups)) {
      if (root === undefined) continue;
      for (const pid of descendants(snapshot.processes, root)) {
        if (groupOf.has(pid)) continue;
        const postgres = snapshot.processes.get(pid)?.comm === 'postgres';
        groupOf.set(pid, postgres ? `${name}.postgres` : name);
      }
    }
  }
  const ticks: Record<string, number> = {};
  for (const name of Object.keys(groups)) ticks[name] = 0;
  for (const [pid, e] of b.processes) {
    const g = groupOf.get(pid);
    if (g) ticks[g] = (ticks[g] ?? 0) + e.ticks - (a.processes.get(pid)?.ticks ?? 0);
  }
  for (const [pid, e] of a.processes) {
    const g = groupOf.get(pid);
    if (g && !b.processes.has(pid)) ticks[g] = (ticks[g] ?? 0) - e.ticks;
  }
  const inGroups = Object.values(ticks).reduce((x, y) => x + y, 0);
  const busy = a.system && b.system ? b.system.busy - a.system.busy : undefined;
  const othersTop = [...b.processes]
    .filter(([pid]) => !groupOf.has(pid))
    .map(([pid, e]) => ({ pid, comm: e.comm, percent: pct(e.ticks - (a.processes.get(pid)?.ticks ?? 0)) }))
    .filter((o) => o.percent >= 1)
    .sort((x, y) => y.percent - x.percent)
    .slice(0, 5);
  return {
    wallMs: round(wallMs),
    percent: Object.fromEntries(Object.entries(ticks).map(([k, v]) => [k, pct(v)])),
    machineBusyPercent: busy === undefined ? null : pct(busy),
    othersPercent: busy === undefined ? null : pct(Math.max(0, busy - inGroups)),
    othersTop,
  };
}

/** The machine, as the write-up names it. */
export function machine() {
  const cpus = os.cpus();
  let lscpuModel: string | undefined;
  try {
    lscpuModel = /Model name:\s*(.+)/.exec(execFileSync('lscpu', { encoding: 'utf8' }))?.[1]?.trim();
  } catch {
    lscpuModel = undefined;
  }
  return {
    cpus: os.availableParallelism(),
    cpuModel: lscpuModel ?? cpus[0]?.model ?? '?',
    memTotalGb: round(os.totalmem() / 1024 ** 3),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  };
}
