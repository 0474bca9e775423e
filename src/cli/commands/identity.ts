import type { Command } from 'commander';
import { createClient } from '../../client/index.js';
import { connect, usable } from '../connect.js';
import type { Cli } from '../context.js';
import { loadCredentials, removeCredentials, saveCredentials } from '../credentials.js';
import { CliFailure } from '../failure.js';
import { safeCell } from '../format.js';
import { readStdinLine } from '../input.js';
import { readHidden } from '../prompt.js';
import { targetOf } from '../target.js';

/** `wfa login` and `wfa logout`: the credentials kept under $XDG_CONFIG_HOME/wfa (~/.config/wfa by default). */
export function registerIdentity(program: Command, cli: Cli): void {
  program
    .command('login')
    .description(
      'sign in and store the credentials (0600) under $XDG_CONFIG_HOME/wfa (~/.config/wfa by default); WFA_URL and WFA_API_KEY override them',
    )
    .option('--username <name>', 'user name', 'admin')
    .option(
      '--password <password>',
      'password (or WFA_PASSWORD; else asked for on a terminal, or one line read from standard input)',
    )
    .option('--api-key <key>', 'store this API key instead of signing in')
    .action((o: LoginOptions) => login(cli, o));

  program
    .command('logout')
    .description('sign out and remove the stored credentials')
    .action(async () => {
      const { configDir } = cli.env;
      const stored = await loadCredentials(configDir);
      // The session is revoked where it was signed in (the stored URL), never at --url or WFA_URL: another
      // server would be handed the refresh token (and WFA_API_KEY is not the session's credential).
      if (stored?.accessToken) {
        const own = await connect({ ...cli.env, apiKey: undefined }, stored, stored.url, cli.bounds()).catch(
          () => undefined,
        );
        await own?.identity.logout(stored.refreshToken).catch(() => undefined);
      }
      await removeCredentials(configDir);
      cli.print(() => 'Signed out', { ok: true });
    });
}

interface LoginOptions {
  username: string;
  password?: string;
  apiKey?: string;
}

async function login(cli: Cli, o: LoginOptions): Promise<void> {
  cli.target = usable(targetOf(cli.options.url, cli.env.url));
  const url = cli.target.url;
  if (o.apiKey) {
    // The key is checked before it is stored: a wrong one fails here, not at the next command.
    await createClient({ ...cli.bounds(), baseUrl: url, apiKey: o.apiKey }).identity.permissions();
    const file = await saveCredentials(cli.env.configDir, { url, apiKey: o.apiKey });
    return cli.print(() => `Stored the API key for ${url} in ${file}`, { url, file });
  }
  const password = o.password ?? cli.env.password ?? (await askPassword(o.username, url));
  if (!password)
    throw new CliFailure('No password: pass --password, set WFA_PASSWORD, or pipe it on standard input', 2);
  const tokens = await createClient({ ...cli.bounds(), baseUrl: url }).identity.login(o.username, password);
  const file = await saveCredentials(cli.env.configDir, {
    url,
    accessToken: tokens.accessToken,
    refreshToken: tokens.refreshToken,
    accessTokenExpiresAt: Date.now() + tokens.expiresIn * 1000,
  });
  cli.print(() => `Signed in to ${url} as ${o.username}; credentials in ${file}`, { url, file });
}

/** On a terminal, asked for without showing it; else the first line of standard input. */
async function askPassword(username: string, url: string): Promise<string | undefined> {
  if (!process.stdin.isTTY) return readStdinLine();
  return readHidden(`Password for ${safeCell(username)} at ${safeCell(url)}: `, process.stdin, process.stderr);
}
