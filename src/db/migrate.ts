import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Logger } from '../logger.js';

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant shared by every process of this service: the advisory lock serialises migrators.
const MIGRATION_LOCK_KEY = 7_304_119_511;

interface MigrationFile {
  version: number;
  name: string;
  file: string;
}

async function listMigrations(): Promise<MigrationFile[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d+_.+\.sql$/.test(f));
  const migrations = files.map((file) => {
    const [num, ...rest] = file.replace(/\.sql$/, '').split('_');
    return { version: Number(num), name: rest.join('_'), file };
  });
  migrations.sort((a, b) => a.version - b.version);
  for (let i = 1; i < migrations.length; i++) {
    if (migrations[i]!.version === migrations[i - 1]!.version) {
      throw new Error(`Two migrations share version ${migrations[i]!.version}: rename one of them`);
    }
  }
  return migrations;
}

/**
 * Applies the numbered SQL files in order, each in its own transaction, recording each in
 * `schema_migrations`. A session-level advisory lock makes two processes starting at once take turns:
 * the second finds everything applied and does nothing. `upTo` stops after that version (a test builds a
 * database as an older release left it, then migrates it).
 */
export async function migrate(pool: pg.Pool, logger?: Logger, opts: { upTo?: number } = {}): Promise<number[]> {
  const migrations = await listMigrations();
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    const done = new Set(rows.map((r) => r.version));
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      if (opts.upTo !== undefined && m.version > opts.upTo) break;
      const sql = await readFile(path.join(MIGRATIONS_DIR, m.file), 'utf8');
      try {
        await client.query('BEGIN');
        // A migration that reads every row of a big table (a VALIDATE) is not cut off by the pool's statement
        // timeout, which is for requests.
        await client.query('SET LOCAL statement_timeout = 0');
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        // Postgres's detail names the row a check failed on (`Key (…)=(…) is not present in …`).
        const detail = (err as { detail?: unknown }).detail;
        throw new Error(
          `Migration ${m.file} failed; nothing of it was applied${typeof detail === 'string' ? ` (${detail})` : ''}`,
          { cause: err },
        );
      }
      applied.push(m.version);
      logger?.info({ migration: m.file }, 'applied migration');
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    client.release();
  }
  return applied;
}
