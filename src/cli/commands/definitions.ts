import type { Command } from 'commander';
import type { Cli } from '../context.js';
import { n, table } from '../format.js';
import { count } from '../options.js';
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
  definitions
    .command('counts <definitionId>')
    .description("how many of a version's unfinished instances wait on, have scheduled, or faulted at each activity")
    .option('--version <n>', 'this version (default the latest)', count)
    .action(async (definitionId: string, o: { version?: number }) => {
      const r = await (await cli.client()).definitions.activityCounts(definitionId, o.version);
      const rows = r.items.map((a) => ({
        activity: a.activityId,
        type: a.type,
        waiting: n(a.waiting),
        scheduled: n(a.scheduled),
        faulted: n(a.faulted),
      }));
      cli.print(
        () =>
          `${r.definitionId} version ${r.version}\n${table(rows, ['activity', 'type', 'waiting', 'scheduled', 'faulted'])}`,
        r,
      );
    });
  addMigrationDraft(definitions, cli);
}
