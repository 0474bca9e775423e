import type { Command } from 'commander';
import type { Cli } from '../context.js';
import { table } from '../format.js';
import { readJson } from '../input.js';
import { addMigrationDraft } from './governance.js';

/** `wfa definitions …`: publish a definition, list the latest versions. */
export function registerDefinitions(program: Command, cli: Cli): void {
  const definitions = program.command('definitions').description('workflow definitions');
  definitions
    .command('publish <file>')
    .description('publish the next version of the definition in FILE (version 3 JSON)')
    .action(async (file: string) => {
      const d = await (await cli.client()).definitions.publish(await readJson(file));
      cli.print(() => `Published ${d.definitionId} version ${d.version} (${d.id})`, d);
    });
  definitions
    .command('list')
    .description('the latest version of each definition')
    .action(async () => {
      const r = await (await cli.client()).definitions.list();
      const rows = r.items.map((d) => ({ id: d.definitionId, version: d.version, name: d.name, created: d.createdAt }));
      cli.print(() => table(rows, ['id', 'version', 'name', 'created']), r);
    });
  addMigrationDraft(definitions, cli);
}
