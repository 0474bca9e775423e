import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The Temporal CLI (whose `server start-dev` is the embedded dev server), when none is configured: the one
 * cached by an earlier build, else one built from its official Go module through the Go module proxy,
 * once, into the cache. An offline machine that reaches the package registries can build it; the SDK's
 * own download needs temporal.download, which such a machine cannot reach.
 */

/** The newest tag `go install` accepts (later tags carry replace directives). */
export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const MODULE = `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`;
/** GOTOOLCHAIN=auto (which fetches the toolchain the CLI's go.mod asks for) exists from Go 1.21. */
const MIN_GO = [1, 21] as const;
const BUILD_MINUTES = 4;
const STALE_LOCK_MS = 30 * 60_000;

/** Where the built binary is kept: `{cacheDir}/temporal-cli/{version}/temporal` (cacheDir: ~/.cache/wf-alter). */
export const cachedCliPath = (cacheDir: string) =>
  path.join(cacheDir, 'temporal-cli', TEMPORAL_CLI_VERSION, 'temporal');

export class CliUnavailableError extends Error {
  override name = 'CliUnavailableError';
}

export interface BuildOptions {
  cacheDir: string;
  /** Where progress goes (the terminal's stderr by default). */
  progress?: NodeJS.WritableStream & { isTTY?: boolean };
  /** For tests: the Go command, and the environment it runs with. */
  go?: string;
  env?: NodeJS.ProcessEnv;
}

/** The Go version `go version` reports, e.g. [1, 26] for "go version go1.26.8 linux/amd64"; undefined without Go. */
export function parseGoVersion(output: string): [number, number] | undefined {
  const m = /\bgo(\d+)\.(\d+)/.exec(output);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

const goTooOld = (v: [number, number]) => v[0] < MIN_GO[0] || (v[0] === MIN_GO[0] && v[1] < MIN_GO[1]);

const INSTALL_GO =
  `Building the Temporal dev server needs Go ${MIN_GO.join('.')} or newer (packaged Go may be older: Debian 12's golang-go is 1.19). ` +
  '`bash .ci/install-go` in the clone installs Go from the Go module proxy into ~/.cache/wf-alter/go, where the start finds it ' +
  '(or see https://go.dev/dl); or set TEMPORAL_CLI_PATH to a temporal binary, or TEMPORAL_ADDRESS to a running Temporal.';

/** Go toolchains `.ci/install-go` put in the cache ({cacheDir}/go/go1.x.y/bin/go), newest first. */
async function cachedGos(cacheDir: string): Promise<string[]> {
  const names = await readdir(path.join(cacheDir, 'go')).catch(() => [] as string[]);
  const version = (n: string) => (n.match(/\d+/g) ?? []).map(Number);
  return names
    .filter((n) => /^go\d+\.\d+(\.\d+)?$/.test(n))
    .sort((a, b) => {
      const [x, y] = [version(a), version(b)];
      for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (y[i] ?? 0) - (x[i] ?? 0);
      return 0;
    })
    .map((n) => path.join(cacheDir, 'go', n, 'bin', 'go'));
}

/**
 * The Go to build with: `opts.go` if given, else the first of `go` on PATH and the cached toolchains that is
 * new enough. Throws with what to install when there is none.
 */
async function findGo(opts: BuildOptions, env: NodeJS.ProcessEnv): Promise<{ go: string; version: [number, number] }> {
  const candidates = opts.go ? [opts.go] : ['go', ...(await cachedGos(opts.cacheDir))];
  let tooOld: [number, number] | undefined;
  for (const go of candidates) {
    const version = await run(go, ['version'], env).then(
      (r) => (r.code === 0 ? parseGoVersion(r.output) : undefined),
      () => undefined,
    );
    if (!version) continue;
    if (!goTooOld(version)) return { go, version };
    tooOld ??= version;
  }
  if (tooOld) throw new CliUnavailableError(`Go ${tooOld.join('.')} is too old. ${INSTALL_GO}`);
  throw new CliUnavailableError(`No Temporal dev server is cached and Go was not found. ${INSTALL_GO}`);
}

/**
 * The cached CLI, built now if absent. Two processes starting at once build once: the first takes a lock
 * folder, the other waits for the binary. The binary appears at its path only when complete (built in a
 * temporary folder, then renamed), so a build interrupted at any point leaves nothing half-written.
 */
export async function ensureCliBinary(opts: BuildOptions): Promise<string> {
  const target = cachedCliPath(opts.cacheDir);
  if (existsSync(target)) return target;
  const dir = path.dirname(target);
  await mkdir(dir, { recursive: true });
  const lock = `${target}.lock`;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age =
        Date.now() -
        (await stat(lock).then(
          (s) => s.mtimeMs,
          () => Date.now(),
        ));
      if (age > STALE_LOCK_MS) {
        await rmdir(lock).catch(() => undefined);
        continue;
      }
      say(opts, 'Another process is building the Temporal CLI; waiting for it…\n');
      while (!existsSync(target) && existsSync(lock)) await sleep(1_000);
      if (existsSync(target)) return target;
    }
  }
  try {
    if (existsSync(target)) return target;
    await build(opts, target);
    return target;
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
}

async function build(opts: BuildOptions, target: string): Promise<void> {
  const env = { ...(opts.env ?? process.env) };
  const { go, version } = await findGo(opts, env);

  const work = await mkdtemp(path.join(path.dirname(target), '.build-'));
  const started = Date.now();
  say(
    opts,
    `The Temporal dev server is not cached: building the Temporal CLI ${TEMPORAL_CLI_VERSION} with Go ${version.join('.')} ` +
      `(once; about ${BUILD_MINUTES} minutes on 2 cores), into ${path.dirname(target)}\n`,
  );
  const tty = Boolean(opts.progress?.isTTY ?? process.stderr.isTTY);
  const ticker = setInterval(
    () => say(opts, tty ? `\r  building… ${elapsed(started)}` : `  still building (${elapsed(started)})\n`),
    tty ? 1_000 : 30_000,
  );
  try {
    const result = await run(go, ['install', MODULE], {
      ...env,
      GOBIN: work,
      GOTOOLCHAIN: 'auto',
      GOFLAGS: '-buildvcs=false',
    });
    if (result.code !== 0 || !existsSync(path.join(work, 'temporal'))) {
      const tail = result.output.trim().split('\n').slice(-15).join('\n');
      throw new CliUnavailableError(
        `Building the Temporal CLI failed (go install ${MODULE}, exit ${result.code}):\n${tail}`,
      );
    }
    await chmod(path.join(work, 'temporal'), 0o755);
    await rename(path.join(work, 'temporal'), target);
  } finally {
    clearInterval(ticker);
    if (tty) say(opts, '\r\x1b[2K');
    await rm(work, { recursive: true, force: true });
  }
  say(opts, `Built the Temporal CLI in ${elapsed(started)}: ${target}\n`);
}

function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

const say = (opts: BuildOptions, text: string) => (opts.progress ?? process.stderr).write(text);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function elapsed(since: number): string {
  const s = Math.round((Date.now() - since) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
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
