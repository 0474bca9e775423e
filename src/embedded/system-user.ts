import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface RunAs {
  uid: number;
  gid: number;
}

/**
 * Postgres refuses to run as root: as root, the `postgres` system user (created if missing) runs it.
 * Undefined when we are not root (Postgres runs as us).
 */
export async function systemPostgresUser(): Promise<RunAs | undefined> {
  if (os.userInfo().uid !== 0) return undefined;
  const found = await lookup();
  if (found) return found;
  try {
    await run('groupadd', ['--system', 'postgres']).catch(() => undefined); // may exist without the user
    await run('useradd', [
      '--system',
      '--gid',
      'postgres',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ]);
  } catch (err) {
    throw new Error(
      'Running as root, the embedded Postgres needs a "postgres" system user and could not create one (useradd): create it, start as a non-root user, or set DATABASE_URL.',
      { cause: err },
    );
  }
  const created = await lookup();
  if (!created) throw new Error('The "postgres" system user was created but cannot be looked up (id postgres).');
  return created;
}

async function lookup(): Promise<RunAs | undefined> {
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}
