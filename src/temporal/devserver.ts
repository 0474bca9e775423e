import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { cachedCliPath, CliUnavailableError, ensureCliBinary } from './cli-binary.js';
import { guardChild } from '../embedded/guardian.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.js';
import type { GoBuildOptions } from './go-build.js';

export interface DevServerOptions {
  /** Explicit binary (TEMPORAL_CLI_PATH). */
  cliPath?: string | undefined;
  /** Where a built CLI is cached (config.cacheDir). */
  cacheDir: string;
  /** SQLite file for persistence; in memory when absent. */
  dbFilename?: string;
  namespace: string;
  port?: number;
  /** 0 or absent: no Web UI. */
  uiPort?: number;
  /** Where the server's pid is written while it runs (a later start stops one a killed run left behind). */
  pidFile?: string;
  /** Called if a dev server we started exits without being stopped. */
  onUnexpectedExit?: (why: string) => void;
  /** Task Queue Fairness (tenants' tasks take turns on a backlogged queue); on unless false (see `devServerFairness`). */
  fairness?: boolean;
  /** How a build of the CLI reports progress and is stopped (src/temporal/go-build.ts). */
  build?: Pick<GoBuildOptions, 'progress' | 'signal'>;
}

/** A running dev server and the two connections to it; `teardown` closes them and stops the server. */
export interface DevServer {
  address: string;
  connection: Connection;
  nativeConnection: NativeConnection;
  teardown(): Promise<void>;
}

/**
 * Starts a Temporal dev server: TEMPORAL_CLI_PATH, else the cached CLI, else the SDK's download, else the
 * CLI built now with Go (src/temporal/cli-binary.ts). With a binary at hand it is our own child in its
 * own process group, so a Ctrl-C in the terminal reaches only the service, which stops it after the
 * worker; and a server that cannot bind its port fails the start instead of the clients silently
 * reaching another one.
 */
export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  if (opts.dbFilename) await mkdir(path.dirname(opts.dbFilename), { recursive: true });
  let binary = opts.cliPath ?? (existsSync(cachedCliPath(opts.cacheDir)) ? cachedCliPath(opts.cacheDir) : undefined);
  if (!binary) {
    // Online, the SDK downloads and runs the server (it owns it); offline that fails at once.
    const viaSdk = await runThroughSdk(opts).catch(() => undefined);
    if (viaSdk) return viaSdk;
    binary = await ensureCliBinary({ cacheDir: opts.cacheDir, ...opts.build });
  }
  try {
    return await runCli(binary, opts);
  } catch (err) {
    if (err instanceof CliUnavailableError) throw err;
    throw new Error(
      `The Temporal dev server did not start (${binary}); set TEMPORAL_ADDRESS to use a running Temporal instead.`,
      { cause: err },
    );
  }
}

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;

/**
 * The flags the SDK passes to `temporal server start-dev`, so both ways give the same server; and eager
 * activity dispatch: a worker completing a workflow task that schedules an activity on its own task queue
 * gets the activity in the same answer, instead of polling for it (~30 ms less per plan step here).
 */
const EAGER_ACTIVITIES = 'system.enableActivityEagerExecution=true';
/**
 * Task Queue Fairness (Temporal 1.29, new matcher): a backlogged task queue hands out tasks to fairness keys
 * (our tenants) in turn. Its backlog lives in other tables than the classic one: switching it on for a
 * queue with a classic backlog strands those tasks, which is why `devServerFairness` switches it on for a
 * data folder only while nothing is in flight.
 */
const FAIRNESS = 'matching.enableFairness=true';
/**
 * One partition per task queue: Temporal orders a backlog (by fairness key, weight, priority) within a
 * partition, and pollers take from partitions at random, so with the default four a backlog of a few
 * batches is handed out nearly at random. A dev server is one host; partitions only spread load over hosts.
 */
const ONE_PARTITION = ['matching.numTaskqueueReadPartitions=1', 'matching.numTaskqueueWritePartitions=1'];
/**
 * The dev server's SQLite file in write-ahead-log mode with `synchronous=normal`: measured on this 2-core
 * machine, 223 workflow starts a second against 80–84 with the default rollback journal and a sync per
 * commit (bench/README.md, "The engine"). What it risks: a commit survives a crash of the dev server's
 * process (the log is in the OS's page cache), but the last commits before a power loss or an OS crash may
 * be lost; the file stays consistent either way. Postgres stays the truth, but a workflow start or signal
 * lost that way is not told again: a deployment that cannot lose one runs a Temporal server of its own
 * (TEMPORAL_ADDRESS); the dev server is the no-setup default.
 */
const SQLITE_PRAGMAS = ['--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal'];
const dynamicConfig = (fairness: boolean) =>
  [
    'frontend.enableServerVersionCheck=false',
    'frontend.enableUpdateWorkflowExecution=true',
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
    EAGER_ACTIVITIES,
    ...(fairness ? [FAIRNESS, ...ONE_PARTITION] : []),
  ].flatMap((v) => ['--dynamic-config-value', v]);

async function runCli(binary: string, opts: DevServerOptions): Promise<DevServer> {
  const port = opts.port || (await freeLoopbackPort());
  const ui = (opts.uiPort ?? 0) > 0;
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--namespace',
    opts.namespace,
    '--log-format',
    'json',
    '--log-level',
    'error',
    ...dynamicConfig(opts.fairness !== false),
    ...(opts.dbFilename ? ['--db-filename', opts.dbFilename, ...SQLITE_PRAGMAS] : []),
    // The plan search attributes (contract section 7), registered before anything starts a plan.
    ...SEARCH_ATTRIBUTES.flatMap((k) => [
      '--search-attribute',
      `${k.name}=${k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword'}`,
    ]),
    ...(ui ? ['--ui-port', String(opts.uiPort)] : ['--headless']),
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: process.platform !== 'win32' });
  // Stopped even if this process dies without stopping it (kill -9): SIGTERM, SIGKILL past the deadline.
  guardChild(child, { signal: 'TERM', graceSeconds: STOP_TIMEOUT_MS / 1000 });
  const { pidFile } = opts;
  if (pidFile && child.pid !== undefined) {
    await writeFile(pidFile, `${child.pid}\n`, { mode: 0o600 });
    child.once('exit', () => void rm(pidFile, { force: true }));
  }
  const recent: string[] = [];
  const keep = (chunk: Buffer) => {
    recent.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    recent.splice(0, Math.max(0, recent.length - 5));
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exit: string | undefined;
  child.once('error', (err) => (exit ??= err.message));
  child.once('exit', (code, signal) => (exit ??= `exited (${signal ?? `code ${code}`})`));
  const address = `127.0.0.1:${port}`;
  try {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await accepts(port))) {
      if (exit) throw new Error(`temporal ${exit}: ${recent.join(' | ')}`);
      if (Date.now() > deadline) throw new Error(`temporal not ready within ${START_TIMEOUT_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    let connections: { connection: Connection; nativeConnection: NativeConnection } | undefined;
    while (!connections) {
      if (exit) throw new Error(`temporal ${exit}: ${recent.join(' | ')}`);
      // Listening is not always serving yet: connect again until the deadline.
      connections = await connectBoth(address).catch((err: unknown) => {
        if (Date.now() > deadline) throw err;
        return undefined;
      });
      if (!connections) await new Promise((r) => setTimeout(r, 200));
    }
    let stopping = false;
    const lost = () => {
      if (!stopping) opts.onUnexpectedExit?.(`Temporal dev server ${exit ?? 'exited'}`);
    };
    if (exit) lost();
    else child.once('exit', lost);
    const { connection, nativeConnection } = connections;
    return {
      address,
      connection,
      nativeConnection,
      teardown: async () => {
        stopping = true;
        await connection.close().catch(() => undefined);
        await nativeConnection.close().catch(() => undefined);
        await stopChild(child);
      },
    };
  } catch (err) {
    await stopChild(child);
    throw err;
  }
}

async function connectBoth(address: string) {
  const connection = await Connection.connect({ address });
  try {
    // The workflow service answers: the server is serving, not only listening.
    await connection.workflowService.getSystemInfo({});
    return { connection, nativeConnection: await NativeConnection.connect({ address }) };
  } catch (err) {
    await connection.close().catch(() => undefined);
    throw err;
  }
}

/** The SDK's download (a dev-only package, loaded only here); it starts and owns the server. */
async function runThroughSdk(opts: DevServerOptions): Promise<DevServer> {
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const ui = (opts.uiPort ?? 0) > 0;
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'cached-download' },
      namespace: opts.namespace,
      ip: '127.0.0.1',
      ...(opts.port ? { port: opts.port } : {}),
      ...(opts.dbFilename ? { dbFilename: opts.dbFilename } : {}),
      ui,
      ...(ui ? { uiPort: opts.uiPort } : {}),
      log: { format: 'json', level: 'error' },
      extraArgs: [
        ...SEARCH_ATTRIBUTES.flatMap((k) => [
          '--search-attribute',
          `${k.name}=${k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword'}`,
        ]),
        '--dynamic-config-value',
        EAGER_ACTIVITIES,
        ...(opts.fairness !== false ? [FAIRNESS, ...ONE_PARTITION].flatMap((v) => ['--dynamic-config-value', v]) : []),
      ],
    },
  });
  return {
    address: env.address,
    connection: env.connection,
    nativeConnection: env.nativeConnection,
    teardown: () => env.teardown(),
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** SIGTERM lets the server close its SQLite file cleanly; past the deadline, SIGKILL. */
async function stopChild(child: ChildProcess): Promise<void> {
  // Never spawned (e.g. ENOENT), or already gone.
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const inTime = await Promise.race([
    exited.then(() => true),
    new Promise<boolean>((r) => setTimeout(() => r(false), STOP_TIMEOUT_MS).unref()),
  ]);
  if (inTime) return;
  child.kill('SIGKILL');
  await exited;
}

/**
 * Whether the embedded dev server of a data folder runs with Task Queue Fairness. A new folder: yes, and a
 * marker file says so from then on. A folder whose Temporal history predates fairness (temporal.sqlite
 * without the marker): only once nothing is in flight, read from Postgres, the truth (no plan unfinished,
 * no instance Pending or Executing), since Temporal 1.29 does not carry a queued task across the switch;
 * until then it runs without, and says so.
 */
export async function devServerFairness(
  dataDir: string,
  inFlight: () => Promise<number>,
  logger: { info(msg: string): void; warn(obj: object, msg: string): void },
): Promise<boolean> {
  const marker = path.join(dataDir, 'temporal-fairness');
  if (existsSync(marker)) return true;
  if (existsSync(path.join(dataDir, 'temporal.sqlite'))) {
    const busy = await inFlight();
    if (busy > 0) {
      logger.warn(
        { inFlight: busy },
        "Task Queue Fairness stays off for this start: this data folder's Temporal history predates it and work is in flight; it turns on at the first start with nothing in flight",
      );
      return false;
    }
    logger.info('Task Queue Fairness is on from now on for this data folder (nothing was in flight)');
  }
  await mkdir(dataDir, { recursive: true });
  await writeFile(marker, 'matching.enableFairness=true since this file was written\n', { mode: 0o600 });
  return true;
}
