import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { elapsed, findGo, type GoBuildOptions, goInstall, MIN_GO, onceAcrossProcesses, say } from './go-build.js';

/**
 * The Temporal CLI (whose `server start-dev` is the embedded dev server), when none is configured: the one
 * cached by an earlier build, else one built from its official Go module through the Go module proxy,
 * once, into the cache. An offline machine that reaches the package registries can build it; the SDK's
 * own download needs temporal.download, which such a machine cannot reach.
 */

export { parseGoVersion } from './go-build.js';

/** The newest tag `go install` accepts (later tags carry replace directives). */
export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const MODULE = `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`;
const BUILD_MINUTES = 4;

/** Where the built binary is kept: `{cacheDir}/temporal-cli/{version}/temporal` (cacheDir: ~/.cache/wf-alter). */
export const cachedCliPath = (cacheDir: string) =>
  path.join(cacheDir, 'temporal-cli', TEMPORAL_CLI_VERSION, 'temporal');

export class CliUnavailableError extends Error {
  override name = 'CliUnavailableError';
}

export type BuildOptions = GoBuildOptions;

const INSTALL_GO =
  `Building the Temporal dev server needs Go ${MIN_GO.join('.')} or newer (packaged Go may be older: Debian 12's golang-go is 1.19). ` +
  '`bash .ci/install-go` in the clone installs Go from the Go module proxy into ~/.cache/wf-alter/go, where the start finds it ' +
  '(or see https://go.dev/dl); or set TEMPORAL_CLI_PATH to a temporal binary, or TEMPORAL_ADDRESS to a running Temporal.';

/**
 * The cached CLI, built now if absent. Two processes starting at once build once (src/temporal/go-build.ts).
 * The binary appears at its path only when complete (built in a temporary folder, then renamed), so a build
 * interrupted at any point leaves nothing half-written.
 */
export async function ensureCliBinary(opts: BuildOptions): Promise<string> {
  const target = cachedCliPath(opts.cacheDir);
  await onceAcrossProcesses(
    `${target}.lock`,
    () => existsSync(target),
    () => build(opts, target),
    opts,
    'Another process is building the Temporal CLI; waiting for it…\n',
  );
  return target;
}

async function build(opts: BuildOptions, target: string): Promise<void> {
  const env = { ...(opts.env ?? process.env) };
  const { go, version } = await findGo(
    opts,
    env,
    (message) => new CliUnavailableError(message),
    'No Temporal dev server is cached and Go was not found.',
    INSTALL_GO,
  );
  await mkdir(path.dirname(target), { recursive: true });
  const work = await mkdtemp(path.join(path.dirname(target), '.build-'));
  const started = Date.now();
  say(
    opts,
    `The Temporal dev server is not cached: building the Temporal CLI ${TEMPORAL_CLI_VERSION} with Go ${version.join('.')} ` +
      `(once; about ${BUILD_MINUTES} minutes on 2 cores), into ${path.dirname(target)}\n`,
  );
  const failed = (command: string, output: string) =>
    new CliUnavailableError(`Building the Temporal CLI failed (${command}):\n${output}`);
  try {
    await goInstall(go, [MODULE], work, opts, failed);
    if (!existsSync(path.join(work, 'temporal'))) throw failed(`go install ${MODULE}`, 'it built no temporal binary');
    await chmod(path.join(work, 'temporal'), 0o755);
    await rename(path.join(work, 'temporal'), target);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  say(opts, `Built the Temporal CLI in ${elapsed(started)}: ${target}\n`);
}

/** `tsx src/temporal/cli-binary.ts`: builds (or finds) the CLI and prints its path; `.ci/run` uses it. */
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { loadConfig } = await import('../config.js');
  ensureCliBinary({ cacheDir: loadConfig().cacheDir }).then(
    (p) => process.stdout.write(`${p}\n`),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
