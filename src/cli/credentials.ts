import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** What `wfa login` keeps: the service URL and either an API key or a token pair. */
export interface Credentials {
  url: string;
  apiKey?: string;
  accessToken?: string;
  refreshToken?: string;
  /** ms since the epoch when the access token expires. */
  accessTokenExpiresAt?: number;
}

/** The CLI's environment: read here only (the service reads its own in src/config.ts). */
export interface CliEnvironment {
  url: string | undefined;
  apiKey: string | undefined;
  password: string | undefined;
  configDir: string;
}

export function cliEnvironment(env: NodeJS.ProcessEnv = process.env): CliEnvironment {
  const nonEmpty = (v: string | undefined) => (v && v.trim() !== '' ? v : undefined);
  return {
    url: nonEmpty(env.WFA_URL),
    apiKey: nonEmpty(env.WFA_API_KEY),
    password: nonEmpty(env.WFA_PASSWORD),
    configDir: path.join(nonEmpty(env.XDG_CONFIG_HOME) ?? path.join(os.homedir(), '.config'), 'wfa'),
  };
}

const fileOf = (configDir: string) => path.join(configDir, 'credentials.json');

export async function loadCredentials(configDir: string): Promise<Credentials | undefined> {
  try {
    return JSON.parse(await readFile(fileOf(configDir), 'utf8')) as Credentials;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(
      `${fileOf(configDir)} is not readable credentials (${(err as Error).message}); run wfa login again`,
    );
  }
}

/**
 * Written 0600 in a 0700 folder: the file holds a key or tokens. A folder that exists with wider rights
 * is narrowed, and the file is written whole under a new name (created 0600) and renamed over the old one,
 * so its contents are never readable by others, not even for a moment.
 */
export async function saveCredentials(configDir: string, credentials: Credentials): Promise<string> {
  await mkdir(configDir, { recursive: true, mode: 0o700 });
  await chmod(configDir, 0o700);
  const file = fileOf(configDir);
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(temporary, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    await rename(temporary, file);
  } catch (err) {
    await rm(temporary, { force: true });
    throw err;
  }
  return file;
}

export async function removeCredentials(configDir: string): Promise<void> {
  await rm(fileOf(configDir), { force: true });
}
