import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
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

/** Starts a Temporal dev server through the SDK's local test environment. */
export async function startDevServer(opts: DevServerOptions): Promise<TestWorkflowEnvironment> {
  if (opts.dbFilename) await mkdir(path.dirname(opts.dbFilename), { recursive: true });
  const ui = (opts.uiPort ?? 0) > 0;
  try {
    return await TestWorkflowEnvironment.createLocal({
      server: {
        executable: resolveCliExecutable(opts.cliPath),
        namespace: opts.namespace,
        ip: '127.0.0.1',
        ...(opts.port ? { port: opts.port } : {}),
        ...(opts.dbFilename ? { dbFilename: opts.dbFilename } : {}),
        ui,
        ...(ui ? { uiPort: opts.uiPort } : {}),
        log: { format: 'json', level: 'error' },
      },
    });
  } catch (err) {
    throw new Error(
      'The Temporal dev server did not start. Offline, build the CLI with `bash .ci/run` (or `go install ' +
        `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}\`) and set TEMPORAL_CLI_PATH, ` +
        'or set TEMPORAL_ADDRESS to a running server.',
      { cause: err },
    );
  }
}
