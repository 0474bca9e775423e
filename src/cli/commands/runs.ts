import type { Command } from 'commander';
import type { Alteration, RunResultView } from '../../client/index.js';
import type { Cli } from '../context.js';
import { table } from '../format.js';
import { readJson } from '../input.js';

/** `wfa run` and `wfa retry`: alterations applied to listed instances now, one result each (exit 1 if one failed). */
export function registerRuns(program: Command, cli: Cli): void {
  program
    .command('run <file> <instanceIds...>')
    .description('apply the alterations of FILE ({alterations}) to these instances now, one result each')
    .action(async (file: string, instanceIds: string[]) => {
      const body = await readJson<{ alterations: Alteration[] }>(file);
      const r = await (await cli.client()).plans.run(instanceIds, body.alterations);
      report(cli, r.results, r);
    });
  program
    .command('retry <instanceIds...>')
    .description('schedule the faulted activities of these instances again (or only --activity)')
    .option('--activity <id...>', 'only these activities')
    .action(async (instanceIds: string[], o: { activity?: string[] }) => {
      const r = await (await cli.client()).plans.retry(instanceIds, o.activity);
      report(cli, r.results, r);
    });
}

function report(cli: Cli, results: RunResultView[], answer: unknown): void {
  cli.print(() => resultsTable(results), answer);
  if (results.some((x) => !x.isSuccessful)) cli.exitCode = 1;
}

function resultsTable(items: RunResultView[]): string {
  return table(
    items.map((r) => ({
      instance: r.workflowInstanceId,
      ok: r.isSuccessful ? 'yes' : 'no',
      runs: r.workflowHasScheduledWork ? 'dispatched' : '',
      log: r.log.map((l) => l.message).join('; '),
    })),
    ['instance', 'ok', 'runs', 'log'],
  );
}
