import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';

/** The Temporal CLI version `.ci/run` builds, and the folder it caches the binary in. */
export const TEMPORAL_CLI_VERSION = 'v1.5.1';
export const TEMPORAL_CLI_CACHE = path.join(
  process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'),
  'wf-alter',
  'temporal-cli',
  TEMPORAL_CLI_VERSION,
  'temporal',
);

export interface DevServerOptions {
  /** Explicit binary (TEMPORAL_CLI_PATH). */
  cliPath?: string | undefined;
  /** SQLite file for persistence; in memory when absent. */
  dbFilename?: string;
  namespace: string;
  port?: number;
  /** 0 or absent: no Web UI. */
  uiPort?: number;
  /** Called if a dev server we started exits without being stopped. */
  onUnexpectedExit?: (why: string) => void;
}

/**
 * Which `temporal` binary to run: TEMPORAL_CLI_PATH, else the one `.ci/run` built into the cache (so
 * an offline machine that ran CI once needs no setting), else the SDK's cached download.
 */
export function resolveCliExecutable(cliPath: string | undefined) {
  if (cliPath) return { type: 'existing-path' as const, path: cliPath };
  if (existsSync(TEMPORAL_CLI_CACHE)) return { type: 'existing-path' as const, path: TEMPORAL_CLI_CACHE };
  return { type: 'cached-download' as const };
}

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;

/**
 * Starts a Temporal dev server. With a CLI binary at hand it is our own child in its own process group,
 * so a Ctrl-C in the terminal reaches only the service, which stops it after the worker; and a server
 * that cannot bind its port fails the start instead of the clients silently reaching another one. Only
 * when the CLI must be downloaded does the SDK start (and own) it.
 */
export async function startDevServer(opts: DevServerOptions): Promise<TestWorkflowEnvironment> {
  if (opts.dbFilename) await mkdir(path.dirname(opts.dbFilename), { recursive: true });
  const executable = resolveCliExecutable(opts.cliPath);
  try {
    return executable.type === 'existing-path' ? await runCli(executable.path, opts) : await runThroughSdk(opts);
  } catch (err) {
    throw new Error(
      'The Temporal dev server did not start. Offline, build the CLI with `bash .ci/run` (or `go install ' +
        `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}\`) and set TEMPORAL_CLI_PATH, ` +
        'or set TEMPORAL_ADDRESS to a running server.',
      { cause: err },
    );
  }
}

/** The flags the SDK passes to `temporal server start-dev`, so both ways give the same server. */
const DYNAMIC_CONFIG = [
  'frontend.enableServerVersionCheck=false',
  'frontend.enableUpdateWorkflowExecution=true',
  'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
].flatMap((v) => ['--dynamic-config-value', v]);

async function runCli(binary: string, opts: DevServerOptions): Promise<TestWorkflowEnvironment> {
  const port = opts.port || (await freeLoopbackPort());
  const ui = (opts.uiPort ?? 0) > 0;
  const args = [
    'server', 'start-dev',
    '--ip', '127.0.0.1',
    '--port', String(port),
    '--namespace', opts.namespace,
    '--log-format', 'json',
    '--log-level', 'error',
    ...DYNAMIC_CONFIG,
    ...(opts.dbFilename ? ['--db-filename', opts.dbFilename] : []),
    ...(ui ? ['--ui-port', String(opts.uiPort)] : ['--headless']),
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: process.platform !== 'win32' });
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
    let env: TestWorkflowEnvironment | undefined;
    while (!env) {
      if (exit) throw new Error(`temporal ${exit}: ${recent.join(' | ')}`);
      // Listening is not always serving yet: connect again until the deadline.
      env = await TestWorkflowEnvironment.createFromExistingServer({ address, namespace: opts.namespace }).catch((err: unknown) => {
        if (Date.now() > deadline) throw err;
        return undefined;
      });
      if (!env) await new Promise((r) => setTimeout(r, 200));
    }
    let stopping = false;
    const lost = () => {
      if (!stopping) opts.onUnexpectedExit?.(`Temporal dev server ${exit ?? 'exited'}`);
    };
    if (exit) lost();
    else child.once('exit', lost);
    // The environment's teardown closes its connections; ours also stops the server we started.
    const closeConnections = env.teardown.bind(env);
    return Object.assign(env, {
      teardown: async () => {
        stopping = true;
        await closeConnections().catch(() => undefined);
        await stopChild(child);
      },
    });
  } catch (err) {
    await stopChild(child);
    throw err;
  }
}

async function runThroughSdk(opts: DevServerOptions): Promise<TestWorkflowEnvironment> {
  const ui = (opts.uiPort ?? 0) > 0;
  return TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'cached-download' },
      namespace: opts.namespace,
      ip: '127.0.0.1',
      ...(opts.port ? { port: opts.port } : {}),
      ...(opts.dbFilename ? { dbFilename: opts.dbFilename } : {}),
      ui,
      ...(ui ? { uiPort: opts.uiPort } : {}),
      log: { format: 'json', level: 'error' },
    },
  });
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
  const inTime = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), STOP_TIMEOUT_MS).unref())]);
  if (inTime) return;
  child.kill('SIGKILL');
  await exited;
}
