import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { round } from './util.js';

let clockTicks: number | undefined;
export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

export interface ProcEntry {
  ppid: number;
  comm: string;
  /** utime + stime + cutime + cstime, in clock ticks. */
  ticks: number;
}

/** Every process's CPU so far (Linux /proc); empty elsewhere. */
export function readProcesses(): Map<number, ProcEntry> {
  const out = new Map<number, ProcEntry>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return out;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    // Fields after "pid (comm) ": state is field 3, ppid 4; utime, stime, cutime, cstime are fields 14..17.
    const f = stat.slice(close + 2).split(' ');
    out.set(Number(pid), {
      ppid: Number(f[1]),
      comm,
      ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]),
    });
  }
  return out;
}

/** System-wide CPU ticks from /proc/stat: busy (everything but idle and iowait), iowait, total. */
export function readSystemCpu(): { busy: number; iowait: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = v[3]! + v[4]!;
    return { busy: total - idle, iowait: v[4]!, total };
  } catch {
    return undefined;
  }
}

export interface CpuSnapshot {
  at: number;
  processes: Map<number, ProcEntry>;
  system: ReturnType<typeof readSystemCpu>;
}

export function cpuSnapshot(): CpuSnapshot {
  return { at: performance.now(), processes: readProcesses(), system: readSystemCpu() };
}

/**
 * CPU used between two snapshots, in ms, split over the bench's own process tree (the parent started
 * Postgres and the Temporal dev server, so they are its descendants): this node process, postgres,
 * temporal; and everything else on the machine ("others": another test run would show here). A
 * Postgres or Temporal not started by the bench (DATABASE_URL, TEMPORAL_ADDRESS) counts as "others".
 */
export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot) {
  const tickMs = 1000 / ticksPerSecond();
  const root = process.ppid;
  const inTree = (snapshot: CpuSnapshot, pid: number) => {
    for (let p = pid, hops = 0; p > 1 && hops < 50; hops++) {
      if (p === root) return true;
      p = snapshot.processes.get(p)?.ppid ?? 0;
    }
    return false;
  };
  const sums = { node: 0, postgres: 0, temporal: 0, benchParent: 0 };
  const add = (pid: number, comm: string, ticks: number) => {
    if (pid === process.pid) sums.node += ticks;
    else if (comm === 'postgres') sums.postgres += ticks;
    else if (comm === 'temporal') sums.temporal += ticks;
    else sums.benchParent += ticks;
  };
  for (const [pid, e] of b.processes) {
    if (inTree(b, pid)) add(pid, e.comm, e.ticks - (a.processes.get(pid)?.ticks ?? 0));
  }
  // A process that exited in between (an idle pooled connection closing, an autovacuum worker) had its
  // whole lifetime added to its parent's cutime/cstime: take back what it had used before the window.
  for (const [pid, e] of a.processes) {
    if (!b.processes.has(pid) && inTree(a, pid)) add(pid, e.comm, -e.ticks);
  }
  const others = [...b.processes]
    .filter(([pid]) => !inTree(b, pid) && pid !== root)
    .map(([pid, e]) => ({ pid, comm: e.comm, ms: round((e.ticks - (a.processes.get(pid)?.ticks ?? 0)) * tickMs) }))
    .filter((o) => o.ms > 0)
    .sort((x, y) => y.ms - x.ms)
    .slice(0, 5);
  const wallMs = b.at - a.at;
  const sys =
    a.system && b.system
      ? { busy: b.system.busy - a.system.busy, iowait: b.system.iowait - a.system.iowait }
      : undefined;
  const tree = sums.node + sums.postgres + sums.temporal + sums.benchParent;
  return {
    wallMs: round(wallMs),
    cores: os.availableParallelism(),
    nodeMs: round(sums.node * tickMs),
    postgresMs: round(sums.postgres * tickMs),
    temporalMs: round(sums.temporal * tickMs),
    systemBusyMs: sys ? round(sys.busy * tickMs) : null,
    iowaitMs: sys ? round(sys.iowait * tickMs) : null,
    othersMs: sys ? round(Math.max(0, sys.busy - tree) * tickMs) : null,
    /** The busiest processes outside the bench during the window (one that started and ended in it is not seen, but its parent's share of its CPU is). */
    othersTop: others,
  };
}
