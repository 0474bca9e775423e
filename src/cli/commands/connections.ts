import type { Command } from 'commander';
import type { Cli } from '../context.js';
import { table, tenantName } from '../format.js';
import { readJson } from '../input.js';

/** `wfa connections …`: the connections to external systems. */
export function registerConnections(program: Command, cli: Cli): void {
  const connections = program.command('connections').description('connections to external systems');
  connections.command('list').action(async () => {
    const r = await (await cli.client()).connections.list();
    const rows = r.items.map((c) => ({
      id: c.id,
      name: c.name,
      type: c.connectionType,
      tenant: tenantName(c.tenantId),
    }));
    cli.print(() => table(rows, ['id', 'name', 'type', 'tenant']), r);
  });
  connections
    .command('create <file>')
    .description('create the connection in FILE ({name, connectionType, connectionConfiguration})')
    .action(async (file: string) => {
      const created = await (await cli.client()).connections.create(await readJson(file));
      cli.print(() => `Created connection ${created.name} (${created.id})`, created);
    });
  connections.command('delete <id>').action(async (id: string) => {
    await (await cli.client()).connections.delete(id);
    cli.print(() => `Deleted connection ${id}`, { id });
  });
}
