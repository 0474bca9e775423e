import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { guardChild } from '../src/embedded/guardian.js';
import { cachedCliPath, ensureCliBinary } from '../src/temporal/cli-binary.js';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.js';
import { sleep } from './util.js';

/**
 * The engine bench's Temporal dev server: the flags src/temporal/devserver.ts passes (`npm start`'s embedded
 * server: eager activities, Task Queue Fairness with one partition per queue, the search attributes), with
 * the SQLite settings chosen by BENCH_ENGINE_DEVSERVER:
 * - `file`: a database file with SQLite's own settings (rollback journal, a sync per commit): what
 *   `npm start` ran before commit 4aa6e7f;
 * - `wal`: the same file with `--sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal`: what
 *   `npm start` runs since 4aa6e7f;
 * - `memory`: no database file (nothing survives the server).
 */
export type DevServerMode = 'file' | 'wal' | 'memory';
export const DEV_SERVER_MODES: readonly DevServerMode[] = ['file', 'wal', 'memory'];

const DYNAMIC_CONFIG = [
  'frontend.enableServerVersionCheck=false',
  'frontend.enableUpdateWorkflowExecution=true',
  'frontend.enableUpdateWorkflowExecutionAsyncAccepted=true',
  'system.enableActivityEagerExecution=true',
  'matching.enableFairness=true',
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
];
const WAL_PRAGMAS = ['--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal'];

export interface BenchDevServer {
  address: string;
  pid: number;
  binary: string;
  /** The command line after the binary, as run. */
  args: string[];
  connection: Connection;
  stop(): Promise<void>;
}

/** TEMPORAL_CLI_PATH, else the CLI the service caches (built with Go if missing: src/temporal/cli-binary.ts). */
export async function temporalCli(cacheDir: string): Promise<string> {
  const configured = process.env.TEMPORAL_CLI_PATH?.trim();
  if (configured) return configured;
  const cached = cachedCliPath(cacheDir);
  return existsSync(cached) ? cached : ensureCliBinary({ cacheDir });
}

export async function startBenchDevServer(opts: {
  binary: string;
  mode: DevServerMode;
  dir: string;
  port: number;
  namespace: string;
}): Promise<BenchDevServer> {
  const db = path.join(opts.dir, 'temporal.sqlite');
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--namespace',
    opts.namespace,
    '--log-format',
    'json',
    '--log-level',
    'error',
    '--headless',
    ...DYNAMIC_CONFIG.flatMap((v) => ['--dynamic-config-value', v]),
    ...(opts.mode === 'memory' ? [] : ['--db-filename', db]),
    ...(opts.mode === 'wal' ? WAL_PRAGMAS : []),
    ...SEARCH_ATTRIBUTES.flatMap((k) => [
      '--search-attribute',
      `${k.name}=${k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword'}`,
    ]),
  ];
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  // Stopped even if the bench dies without stopping it.
  guardChild(child, { signal: 'TERM', graceSeconds: 20 });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-2000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const address = `127.0.0.1:${opts.port}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const inTime = await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)]);
    if (!inTime) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the dev server exited (${child.exitCode}): ${stderr}`);
      if (Date.now() > deadline) throw new Error('the dev server did not answer within 60 s');
      if (await accepts(opts.port)) {
        const connection = await Connection.connect({ address }).catch(() => undefined);
        if (connection) {
          const ok = await connection.workflowService.getSystemInfo({}).then(
            () => true,
            () => false,
          );
          if (ok)
            return {
              address,
              pid: child.pid!,
              binary: opts.binary,
              args,
              connection,
              stop: async () => {
                await connection.close().catch(() => undefined);
                await stop();
              },
            };
          await connection.close().catch(() => undefined);
        }
      }
      await sleep(200);
    }
  } catch (err) {
    await stop();
    throw err;
  }
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

/** `temporal workflow count -q <query>`: the number of executions the server's visibility lists. */
export function countWorkflows(binary: string, address: string, namespace: string, query: string): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      ['workflow', 'count', '--address', address, '--namespace', namespace, '--query', query, '--output', 'json'],
      { timeout: 30_000 },
      (err, stdout) => {
        if (err) return reject(err);
        try {
          const parsed = JSON.parse(stdout) as { count?: string | number };
          resolve(Number(parsed.count ?? 0));
        } catch (e) {
          reject(e as Error);
        }
      },
    );
  });
}
