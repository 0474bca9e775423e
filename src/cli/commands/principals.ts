import type { Command } from 'commander';
import type { Cli } from '../context.js';
import { CliFailure } from '../failure.js';
import { safeCell, table, tenantName } from '../format.js';
import { readStdinLine } from '../input.js';
import { readHidden } from '../prompt.js';

/** Who created a key or user, as the lists show it. */
const creator = (by: { kind: 'user' | 'apiKey'; id: string; name: string | null } | null) =>
  by ? `${by.name ?? by.id} (${by.kind === 'user' ? 'user' : 'key'})` : '-';

/** A comma- or space-separated list of grants (`alterations:view,alterations:approve`). */
const grants = (text: string | undefined) =>
  (text ?? '')
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter(Boolean);

/**
 * `wfa users …` and `wfa keys …`: the people and programs of a tenant, with the permissions they grant and who
 * created each (four eyes follow these: a key or user never approves the plans of the principal that made it).
 */
export function registerPrincipals(program: Command, cli: Cli): void {
  const users = program.command('users').description("the tenant's users (sign in with wfa login, or in the console)");
  users
    .command('list')
    .description('the users, their permissions and who created each')
    .action(async () => {
      const r = await (await cli.client()).identity.listUsers();
      const rows = r.items.map((u) => ({
        name: u.name,
        permissions: [...u.permissions, ...u.roles.map((x) => `role:${x}`)].join(',') || '-',
        'created by': creator(u.createdBy),
        tenant: tenantName(u.tenantId),
        id: u.id,
      }));
      cli.print(() => table(rows, ['name', 'permissions', 'created by', 'tenant', 'id']), r);
    });
  users
    .command('create <name>')
    .description('create a user who signs in with a password; it may hold only permissions you hold yourself')
    .requiredOption('--permissions <list>', 'what it may do, e.g. "alterations:view,alterations:approve" (or "*")')
    .option(
      '--password <password>',
      'its password, at least 8 characters (or WFA_NEW_PASSWORD; else asked for on a terminal, or read from standard input)',
    )
    .option('--tenant <id>', 'place it in another tenant (the operator only)')
    .action(async (name: string, o: { permissions: string; password?: string; tenant?: string }) => {
      const password =
        o.password ??
        process.env.WFA_NEW_PASSWORD ??
        (process.stdin.isTTY
          ? await readHidden(`Password for the new user ${safeCell(name)}: `, process.stdin, process.stderr)
          : await readStdinLine());
      if (!password)
        throw new CliFailure('No password: pass --password, set WFA_NEW_PASSWORD, or pipe it on standard input', 2);
      const made = await (
        await cli.client()
      ).identity.createUser({
        name,
        password,
        permissions: grants(o.permissions),
        ...(o.tenant !== undefined ? { tenantId: o.tenant } : {}),
      });
      cli.print(
        () => `Created user ${safeCell(made.name)} (${made.id}) with ${made.permissions.join(', ') || 'no permission'}`,
        made,
      );
    });
  users.command('delete <id>').action(async (id: string) => {
    await (await cli.client()).identity.deleteUser(id);
    cli.print(() => `Deleted user ${id}`, { id });
  });

  const keys = program
    .command('keys')
    .description("the tenant's API keys (for programs; wfa login --api-key stores one)");
  keys
    .command('list')
    .description('the keys (never the key itself), their permissions and who created each')
    .action(async () => {
      const r = await (await cli.client()).identity.listApiKeys();
      const rows = r.items.map((k) => ({
        name: k.name,
        permissions: k.permissions.join(',') || '-',
        'created by': creator(k.createdBy),
        'last used': k.lastUsedAt ?? '-',
        id: k.id,
      }));
      cli.print(() => table(rows, ['name', 'permissions', 'created by', 'last used', 'id']), r);
    });
  keys
    .command('create <name>')
    .description('create an API key; it is shown this once (only its hash is stored)')
    .requiredOption('--permissions <list>', 'what it may do, e.g. "alterations:execute,alterations:view"')
    .option('--tenant <id>', 'place it in another tenant (the operator only)')
    .option('--expires-at <time>', 'when it stops working (ISO 8601 with offset)')
    .action(async (name: string, o: { permissions: string; tenant?: string; expiresAt?: string }) => {
      const made = await (
        await cli.client()
      ).identity.createApiKey({
        name,
        permissions: grants(o.permissions),
        ...(o.tenant !== undefined ? { tenantId: o.tenant } : {}),
        ...(o.expiresAt ? { expiresAt: o.expiresAt } : {}),
      });
      cli.print(
        () =>
          [
            `Created API key ${safeCell(made.name)} (${made.id}); it is shown this once:`,
            `  ${made.key}`,
            `Use it with: WFA_API_KEY=… wfa …, or wfa login --api-key …`,
          ].join('\n'),
        made,
      );
    });
  keys.command('revoke <id>').action(async (id: string) => {
    await (await cli.client()).identity.revokeApiKey(id);
    cli.print(() => `Revoked API key ${id}`, { id });
  });
}
