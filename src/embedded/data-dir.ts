import { chmod, mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * DATA_DIR holds secrets (the signing key, the Postgres password, Temporal's history): it is private to
 * the service user (0700; the embedded Postgres may widen it to 0711 as root, see postgres.ts), and
 * files left readable by older versions (temporal.sqlite was 0644) lose their group and other bits.
 */
export async function prepareDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  for (const entry of await readdir(dataDir, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(dataDir, entry.name);
    const { mode } = await stat(file);
    if (mode & 0o077) await chmod(file, mode & 0o700);
  }
}
