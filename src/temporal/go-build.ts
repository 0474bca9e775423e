import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * What the Temporal tools this project builds from their Go modules share (the CLI whose `server
 * start-dev` is the embedded dev server, src/temporal/cli-binary.ts; the real Temporal server the tests run,
 * src/temporal/server-binary.ts): finding a Go new enough, one build at a time per cache folder, and
 * progress while a build of minutes runs. A machine that reaches the package registries but not the web
 * can build them: the Go module proxy is such a registry.
 */

/** GOTOOLCHAIN=auto (which fetches the toolchain a module's go.mod asks for) exists from Go 1.21. */
export const MIN_GO = [1, 21] as const;
const STALE_LOCK_MS = 30 * 60_000;

export interface GoBuildOptions {
  cacheDir: string;
  /** Where progress goes (the terminal's stderr by default). */
  progress?: NodeJS.WritableStream & { isTTY?: boolean };
  /** For tests: the Go command, and the environment it runs with. */
  go?: string;
  env?: NodeJS.ProcessEnv;
  /** Aborted: the build's processes are stopped (the service stops while it builds in the background). */
  signal?: AbortSignal;
}

/** The Go version `go version` reports, e.g. [1, 26] for "go version go1.26.8 linux/amd64"; undefined without Go. */
export function parseGoVersion(output: string): [number, number] | undefined {
  const m = /\bgo(\d+)\.(\d+)/.exec(output);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

const goTooOld = (v: [number, number]) => v[0] < MIN_GO[0] || (v[0] === MIN_GO[0] && v[1] < MIN_GO[1]);

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
 * new enough. Without one, throws what `unavailable` makes of the sentence that says so: "Go 1.x is too old."
 * or `missing`, each followed by `advice` (what else the user can do).
 */
export async function findGo(
  opts: GoBuildOptions,
  env: NodeJS.ProcessEnv,
  unavailable: (message: string) => Error,
  missing: string,
  advice: string,
): Promise<{ go: string; version: [number, number] }> {
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
  throw unavailable(`${tooOld ? `Go ${tooOld.join('.')} is too old.` : missing} ${advice}`);
}

/**
 * Runs `build` once across processes: two starts at once build once. The first takes the lock folder, the
 * others wait until `done()` (or the lock goes, then try themselves). A lock older than half an hour is a
 * build that was killed: it is taken over.
 */
export async function onceAcrossProcesses(
  lock: string,
  done: () => boolean,
  build: () => Promise<void>,
  opts: GoBuildOptions,
  waiting: string,
): Promise<void> {
  if (done()) return;
  await mkdir(path.dirname(lock), { recursive: true });
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
      say(opts, waiting);
      while (!done() && existsSync(lock)) await sleep(1_000);
      if (done()) return;
    }
  }
  try {
    if (!done()) await build();
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
}

/**
 * `go install` of `modules` with GOBIN `gobin`: GOTOOLCHAIN=auto fetches the Go a module asks for through
 * the module proxy, and -buildvcs=false because the build runs outside any repository. While it runs, a
 * line every 30 s (a clock every second on a terminal) says it still is. A failure throws what `failed`
 * makes of the command (with its exit code) and the end of its output.
 */
export async function goInstall(
  go: string,
  modules: string[],
  gobin: string,
  opts: GoBuildOptions,
  failed: (command: string, output: string) => Error,
): Promise<void> {
  const env = { ...(opts.env ?? process.env) };
  // Go's work folders go under the cache, one folder a build, and go with the build whatever ends it; a build
  // killed with its process leaves its folder, which the next build removes, saying the last one was cut short.
  const work = await buildWorkFolder(opts);
  const started = Date.now();
  const tty = Boolean(opts.progress?.isTTY ?? process.stderr.isTTY);
  const ticker = setInterval(
    () => say(opts, tty ? `\r  building… ${elapsed(started)}` : `  still building (${elapsed(started)})\n`),
    tty ? 1_000 : 30_000,
  );
  try {
    const result = await run(
      go,
      ['install', ...modules],
      { ...env, GOBIN: gobin, GOTOOLCHAIN: 'auto', GOFLAGS: '-buildvcs=false', GOTMPDIR: work },
      undefined,
      opts.signal,
    );
    if (opts.signal?.aborted) throw new Error('the build was stopped');
    if (result.code !== 0) {
      const tail = result.output.trim().split('\n').slice(-15).join('\n');
      throw failed(`go install ${modules.join(' ')}, exit ${result.code}`, tail);
    }
  } finally {
    clearInterval(ticker);
    if (tty) say(opts, '\r\x1b[2K');
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
    // Stopped (Ctrl-C, a stop of the service): the next start is told, and builds from the beginning.
    if (opts.signal?.aborted)
      await writeFile(path.join(path.dirname(work), INTERRUPTED), new Date().toISOString()).catch(() => undefined);
  }
}

/** Where the builds' work folders are (`{cacheDir}/go-work/{pid}-{n}`), and the mark of a build that was stopped. */
const WORK_ROOT = 'go-work';
const INTERRUPTED = 'interrupted';
/** Builds this process started (two at once each have a folder of their own). */
let builds = 0;

/**
 * A work folder of this build's own, after removing what earlier builds left: the folder of a build whose process
 * is gone (killed mid-way) and the mark of one that was stopped. Either is said in one line.
 */
async function buildWorkFolder(opts: GoBuildOptions): Promise<string> {
  const root = path.join(opts.cacheDir, WORK_ROOT);
  await mkdir(root, { recursive: true });
  let cutShort = false;
  for (const name of await readdir(root)) {
    if (name === INTERRUPTED) cutShort = true;
    else if (/^\d+-\d+$/.test(name) && !alive(Number(name.split('-')[0]))) cutShort = true;
    else continue;
    await rm(path.join(root, name), { recursive: true, force: true });
  }
  if (cutShort)
    say(opts, '  An earlier build was interrupted before it ended: its work is gone, and this build starts over.\n');
  const work = path.join(root, `${process.pid}-${++builds}`);
  await mkdir(work, { recursive: true });
  return work;
}

/** Whether a process of this id runs (one that is not ours to signal runs too). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs a command to its end and keeps the tail of its output. With `signal`, it runs in a process group of
 * its own and the whole group is stopped when the signal aborts (`go install` runs the compiler in
 * processes of its own).
 */
export function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd?: string,
  signal?: AbortSignal,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: Boolean(signal) });
    const stop = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    };
    if (signal) {
      if (signal.aborted) stop();
      else signal.addEventListener('abort', stop, { once: true });
      child.once('close', () => signal.removeEventListener('abort', stop));
    }
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

export const say = (opts: GoBuildOptions, text: string) => (opts.progress ?? process.stderr).write(text);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function elapsed(since: number): string {
  const s = Math.round((Date.now() - since) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}
