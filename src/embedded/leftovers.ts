import { mkdir, readdir, readFile, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * What a killed run of the service can leave in its data folder, and how a new start takes it back.
 *
 * `DATA_DIR/service.pid` says which service process uses the folder. A start that finds it naming a live
 * service refuses (two services on one folder would share one Postgres and one Temporal history). Otherwise
 * whatever still runs from that folder (its Postgres, named by `postgres/postmaster.pid`; its dev server,
 * named by `temporal-dev-server.pid`) was left by a run that did not stop in order: the new start stops it,
 * saying so in one line, and comes up. The parent-death watch (guardian.ts) normally stops them within
 * seconds of such a death; this covers a start that comes sooner, or a machine without /bin/sh.
 */

export const SERVICE_PID_FILE = 'service.pid';
export const DEV_SERVER_PID_FILE = 'temporal-dev-server.pid';
export const postgresDataDirOf = (dataDir: string) => path.join(dataDir, 'postgres');
export const devServerDbOf = (dataDir: string) => path.join(dataDir, 'temporal.sqlite');

export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
}

interface Say {
  info(obj: object, msg: string): void;
}

/**
 * Claims `dataDir` for this process, stopping what an earlier, killed run left running in it. `release`
 * gives the claim back; `release(true)`, for a start that stopped before it used the folder (a taken port),
 * also removes the folders this claim made, if they are still empty: a failed first start leaves none behind.
 */
export async function claimDataDir(
  dataDir: string,
  uses: { postgres: boolean; devServer: boolean },
  logger: Say,
): Promise<{ release(unused?: boolean): Promise<void> }> {
  // The first folder made (the data folder, or a parent of it made with it); undefined when it was there.
  const made = await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const pidFile = path.join(dataDir, SERVICE_PID_FILE);
  // Read and written under a lock: two starts at once must not both find the folder free.
  const unlock = await lockClaim(dataDir);
  try {
    const other = await pidIn(pidFile);
    if (other !== undefined && other !== process.pid && (await running(other, isService))) {
      throw new DataDirInUseError(
        `DATA_DIR ${dataDir} is in use by another running service (pid ${other}): stop it first, or set DATA_DIR to another folder.`,
      );
    }
    await writeFile(pidFile, `${process.pid}\n`, { mode: 0o600 });
  } finally {
    await unlock();
  }
  if (uses.postgres) {
    const pgData = postgresDataDirOf(dataDir);
    await stopLeftover(path.join(pgData, 'postmaster.pid'), {
      what: 'embedded Postgres',
      signal: 'SIGINT',
      graceMs: 30_000,
      // The postmaster's command line names its data folder (`postgres -D <dir> ...`).
      looksLike: (cmd) => /(^|\/)postgres\s/.test(cmd) && cmd.includes(pgData),
      logger,
    });
  }
  if (uses.devServer) {
    const db = devServerDbOf(dataDir);
    await stopLeftover(path.join(dataDir, DEV_SERVER_PID_FILE), {
      what: 'Temporal dev server',
      signal: 'SIGTERM',
      graceMs: 20_000,
      looksLike: (cmd) => cmd.includes('start-dev') && cmd.includes(db),
      logger,
    });
  }
  return {
    async release(unused = false) {
      if ((await pidIn(pidFile)) === process.pid) await rm(pidFile, { force: true });
      if (unused && made !== undefined) await removeEmptyUpTo(dataDir, made);
    },
  };
}

/** The folder whose creation is the lock of a claim (mkdir either makes it or fails: one start at a time). */
export const CLAIM_LOCK_DIR = '.claiming';
/** A lock older than this was left by a start killed while claiming (a claim takes milliseconds): taken over. */
const CLAIM_LOCK_STALE_MS = 10_000;
/** How long a start waits for another's claim before it gives up. */
const CLAIM_LOCK_WAIT_MS = 15_000;

/**
 * Takes the claim lock of `dataDir`, waiting while another start holds it; answers how to give it back (only
 * this lock: one taken over since is left alone). A lock left by a start killed while it held it is taken over
 * once it is CLAIM_LOCK_STALE_MS old, by one waiting start at a time (the right to take over is a lock of its
 * own, `.claiming.takeover`, itself taken over when a second kill left it). The lock's age is its folder's
 * mtime (an empty folder's is its creation) against this machine's clock: DATA_DIR on a local disk, as the
 * embedded Postgres needs.
 */
export async function lockClaim(dataDir: string): Promise<() => Promise<void>> {
  const lock = path.join(dataDir, CLAIM_LOCK_DIR);
  const until = performance.now() + CLAIM_LOCK_WAIT_MS;
  for (;;) {
    const taken = await makeLock(lock, dataDir);
    if (taken) {
      return async () => {
        const now = await stat(lock).catch(() => undefined);
        if (now?.ino === taken.ino && now.mtimeMs === taken.mtimeMs)
          await rm(lock, { recursive: true, force: true }).catch(() => undefined);
      };
    }
    const age = await ageOf(lock);
    if (age === undefined) continue; // gone meanwhile: try again at once
    // Taken over: try again at once. Otherwise (fresh, or another start has the right to take it over) wait.
    if (age > CLAIM_LOCK_STALE_MS && (await takeOver(lock))) continue;
    if (performance.now() >= until)
      throw new DataDirInUseError(
        `DATA_DIR ${dataDir} is being claimed by another start (${lock} exists): wait for it, or remove that folder if no start is running.`,
      );
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Makes the lock folder: its identity, or undefined when it exists (the data folder is made again if gone). */
async function makeLock(lock: string, dataDir: string): Promise<{ ino: number; mtimeMs: number } | undefined> {
  try {
    await mkdir(lock, { mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return undefined;
    // The data folder was removed after we made it (another start that failed gave back the folders it made).
    if (code !== 'ENOENT') throw err;
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    return makeLock(lock, dataDir);
  }
  const made = await stat(lock);
  return { ino: made.ino, mtimeMs: made.mtimeMs };
}

const ageOf = (dir: string) =>
  stat(dir).then(
    (s) => Date.now() - s.mtimeMs,
    () => undefined,
  );

/**
 * Removes a stale lock, if it is still stale once this start alone has the right to (see `lockClaim`); answers
 * whether it did, or removed a right to take over that a start killed while holding it left.
 */
async function takeOver(lock: string): Promise<boolean> {
  const right = `${lock}.takeover`;
  const mine = await mkdir(right, { mode: 0o700 }).then(
    () => true,
    () => false,
  );
  if (!mine) {
    if (((await ageOf(right)) ?? 0) <= CLAIM_LOCK_STALE_MS) return false;
    await rm(right, { recursive: true, force: true });
    return true;
  }
  try {
    if (((await ageOf(lock)) ?? 0) <= CLAIM_LOCK_STALE_MS) return false;
    await rm(lock, { recursive: true, force: true });
    return true;
  } finally {
    await rm(right, { recursive: true, force: true });
  }
}

/** Removes `dir` and its parents up to `top`, each only while empty (rmdir refuses a folder with anything in it). */
async function removeEmptyUpTo(dir: string, top: string): Promise<void> {
  const last = path.resolve(top);
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    try {
      await rmdir(d);
    } catch {
      return;
    }
    if (d === last || path.dirname(d) === d) return;
  }
}

interface Leftover {
  what: string;
  signal: NodeJS.Signals;
  graceMs: number;
  looksLike(commandLine: string): boolean;
  logger: Say;
}

async function stopLeftover(pidFile: string, l: Leftover): Promise<void> {
  const pid = await pidIn(pidFile);
  if (pid === undefined || !(await running(pid, l.looksLike))) return;
  l.logger.info({}, `stopping the ${l.what} (pid ${pid}) that an earlier run of this data folder left running`);
  signal(pid, l.signal);
  if (await gone(pid, l.graceMs)) return;
  signal(pid, 'SIGKILL');
  if (!(await gone(pid, 5_000))) throw new Error(`The ${l.what} left running (pid ${pid}) did not stop.`);
}

/** The first line of a pid file as a pid; undefined when there is none. */
async function pidIn(file: string): Promise<number | undefined> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const pid = Number(text.split('\n')[0]?.trim());
  return Number.isInteger(pid) && pid > 1 ? pid : undefined;
}

const isService = (cmd: string) => /\bnode\b/.test(cmd) && /\bmain\.(ts|js)\b/.test(cmd);

/**
 * Whether `pid` is a live process whose command line passes `looksLike` (a pid the system handed to another
 * program since is not ours). Without /proc (not Linux) a live pid is taken at its word.
 */
async function running(pid: number, looksLike: (cmd: string) => boolean): Promise<boolean> {
  if (!(await alive(pid))) return false;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return process.platform !== 'linux';
  return looksLike(cmdline.split('\0').join(' '));
}

/** A process that exists and has not exited: on Linux a zombie (exited, not reaped) is gone once all its threads are. */
async function alive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return process.platform !== 'linux';
  // "pid (comm) S ...": the state is the first field after the command's closing parenthesis. A zombie
  // leader whose other threads are still exiting still holds the process's files (its listening ports).
  if (!/^ [ZX]/.test(stat.slice(stat.lastIndexOf(')') + 1))) return true;
  const threads = await readdir(`/proc/${pid}/task`).catch(() => []);
  return threads.length > 1;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Gone meanwhile.
  }
}

async function gone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (await alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}
