import { type ChildProcess, spawn, type SpawnOptions } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Enough of a process's output to say why it failed, without holding a long run's whole log. */
const KEEP_CHARS = 200_000;

export interface Spawned {
  child: ChildProcess;
  /** stdout as it came, the last KEEP_CHARS characters. */
  out(): string;
  /** stderr as it came, the last KEEP_CHARS characters. */
  err(): string;
  /** Both, for an error message: the last `lines` lines of each. */
  tail(lines?: number): string;
  /** Settles once the process has exited, however early (a wait that cannot outlive its child). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Whether it has exited. */
  done(): boolean;
}

/**
 * A child process whose output is kept (never discarded: a test that fails says what the process said)
 * and whose exit is awaited from the moment it starts.
 */
export function spawnKept(
  command: string,
  args: string[],
  options: SpawnOptions & { stdin?: 'pipe' | 'ignore' },
): Spawned {
  const { stdin = 'ignore', ...rest } = options;
  const child = spawn(command, args, { ...rest, stdio: [stdin, 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let finished = false;
  child.stdout!.on('data', (c: Buffer) => (out = (out + c.toString('utf8')).slice(-KEEP_CHARS)));
  child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString('utf8')).slice(-KEEP_CHARS)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('error', (e) => {
      err += `\n(spawn failed: ${e.message})`;
      finished = true;
      resolve({ code: null, signal: null });
    });
    child.once('exit', (code, signal) => {
      finished = true;
      resolve({ code, signal });
    });
  });
  const last = (text: string, lines: number) => text.split('\n').slice(-lines).join('\n');
  return {
    child,
    out: () => out,
    err: () => err,
    tail: (lines = 40) =>
      `--- stdout (last ${lines} lines) ---\n${last(out, lines)}\n--- stderr ---\n${last(err, lines)}`,
    exited,
    done: () => finished,
  };
}

/** Resolves with the exit, or 'hung' after `ms`. */
export function exitWithin(
  p: Spawned,
  ms: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), ms)));
  return Promise.race([p.exited, hung]).finally(() => clearTimeout(timer));
}

export interface ProcessInfo {
  ppid: number;
  pgid: number;
  state: string;
  cmdline: string;
}

/** Every process on the machine, from /proc: pid → parent, process group, state, command line. */
export function processTable(): Map<number, ProcessInfo> {
  const table = new Map<number, ProcessInfo>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      table.set(Number(name), { state: rest[0]!, ppid: Number(rest[1]), pgid: Number(rest[2]), cmdline });
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** The pid and all its descendants. */
export function processTree(pid: number): number[] {
  const table = processTable();
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    for (const [child, info] of table) if (info.ppid === tree[i]) tree.push(child);
  }
  return tree;
}

/** Live (not zombie) processes among pids, or whose command line names the data folder. */
export function survivors(pids: number[], dataDir: string): string[] {
  const left: string[] = [];
  for (const [pid, info] of processTable()) {
    if (info.state === 'Z') continue;
    if (pids.includes(pid) || info.cmdline.includes(dataDir)) left.push(`${pid} ${info.cmdline.slice(0, 200)}`);
  }
  return left;
}

/** Survivors after waiting up to `ms` for them to go (a helper such as esbuild ends a moment after its parent). */
export async function noneLeft(pids: number[], dataDir: string, ms = 10_000): Promise<string[]> {
  const deadline = Date.now() + ms;
  let left = survivors(pids, dataDir);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    left = survivors(pids, dataDir);
  }
  return left;
}

export interface EmbeddedPorts {
  api: number;
  postgres: number;
  temporal: number;
}

/**
 * The environment of a service in embedded mode (its own Postgres and dev server in `dataDir`): the
 * shared test servers and credentials of the test run are not passed on.
 */
export function embeddedEnv(dataDir: string, ports: EmbeddedPorts, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'ADMIN_API_KEY', 'ADMIN_PASSWORD', 'AUTH_SIGNING_KEY'])
    delete env[name];
  return {
    ...env,
    DATA_DIR: dataDir,
    PORT: String(ports.api),
    EMBEDDED_POSTGRES_PORT: String(ports.postgres),
    TEMPORAL_DEV_SERVER_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: '0',
    LOG_LEVEL: 'info',
    ...extra,
  };
}

/**
 * Stops a process this test started, by its pid: `signal` (SIGTERM by default), SIGKILL past `deadlineMs`;
 * resolves once it has exited. Nothing to do for one that already has.
 */
export async function stopProcess(p: Spawned, signal: NodeJS.Signals = 'SIGTERM', deadlineMs = 20_000): Promise<void> {
  if (p.done() || p.child.pid === undefined) return;
  try {
    process.kill(p.child.pid, signal);
  } catch {
    return; // gone meanwhile
  }
  if ((await exitWithin(p, deadlineMs)) !== 'hung') return;
  try {
    process.kill(p.child.pid, 'SIGKILL');
  } catch {
    // gone meanwhile
  }
  await p.exited;
}

/** SIGKILL, as a crash would end it (no cleanup, no checkpoint); resolves once it has exited. */
export async function kill9(p: Spawned): Promise<void> {
  if (p.done() || p.child.pid === undefined) return;
  try {
    process.kill(p.child.pid, 'SIGKILL');
  } catch {
    return;
  }
  await p.exited;
}

/**
 * Polls `check` (every 100 ms) until it returns a value, and returns it. Fails after `timeoutMs`, or at once
 * when `p` exits meanwhile, with its output's tail: a wait never outlives the process it waits on.
 */
export async function waitUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  p?: Spawned,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (p?.done()) throw new Error(`the process exited while waiting for ${what}\n${p.tail()}`);
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${p ? `\n${p.tail()}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
