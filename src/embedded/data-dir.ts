import { chmod, mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';

/** The files the service keeps directly in DATA_DIR (Postgres's own folder is handled in postgres.ts). */
const OWN_FILE = /^(temporal\.sqlite(-wal|-shm|-journal)?|auth-signing-key|postgres\.password)$/;

/**
 * DATA_DIR holds secrets (the signing key, the Postgres password, Temporal's history): it is private to
 * the service user (0700; the embedded Postgres may widen it to 0711 as root, see postgres.ts). Our files
 * left readable by older versions (temporal.sqlite was 0644) lose their group and other bits; other
 * files in the folder are not ours to change.
 */
export async function prepareDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  for (const entry of await readdir(dataDir, { withFileTypes: true })) {
    if (!entry.isFile() || !OWN_FILE.test(entry.name)) continue;
    const file = path.join(dataDir, entry.name);
    const { mode } = await stat(file);
    if (mode & 0o077) await chmod(file, mode & 0o700);
  }
}
