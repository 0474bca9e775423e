import type { Command } from 'commander';
import type { Cli } from '../context.js';
import { CliFailure } from '../failure.js';
import { n, safeCell } from '../format.js';
import { count } from '../options.js';
import { type PagingOptions, printPages } from '../paging.js';

const INCLUDES = ['Failed', 'Unverified'] as const;

/**
 * `wfa incidents` (what is broken, and where) and `wfa retry-failed <planId>` (a plan over what a finished plan
 * did not get done). A version's activity counts are `wfa definitions counts`, an instance's changes
 * `wfa instances changes`.
 */
export function registerFindFix(program: Command, cli: Cli): void {
  program
    .command('incidents')
    .description("the tenant's open incidents grouped by definition, version, activity and message, largest first")
    .option('--definition <id>', 'only this definition')
    .option('--limit <n>', 'groups per page (1 to 100)', count, 20)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (o: PagingOptions & { definition?: string; limit: number }) => {
      const c = await cli.client();
      const query = { ...(o.definition ? { definitionId: o.definition } : {}), limit: o.limit };
      await printPages((after) => c.instances.incidents({ ...query, ...(after ? { after } : {}) }), o, cli.paging(), {
        columns: ['instances', 'definition', 'activity', 'message', 'sample'],
        row: (g) => ({
          instances: n(g.count),
          definition: `${g.definitionId} v${g.version}`,
          activity: `${g.activityId} (${g.activityType})`,
          message: g.message,
          sample: g.sampleInstanceIds[0] ?? '',
        }),
        more: cli.more,
      });
    });
  program
    .command('retry-failed <planId>')
    .description(
      "a new plan with a finished plan's alterations, rollout and verify over the instances of its failed and unverified jobs (--include)",
    )
    .option('--id <id>', 'id of the retry plan (idempotent)')
    .option('--include <list>', 'which jobs to retry: Failed, Unverified or both (default both)')
    .option('--watch', 'draw the retry plan until it ends')
    .action(async (planId: string, o: { id?: string; include?: string; watch?: boolean }) => {
      const include = o.include?.split(',').map((s) => s.trim());
      const unknown = include?.find((s) => !(INCLUDES as readonly string[]).includes(s));
      if (unknown !== undefined)
        throw new CliFailure(`--include takes ${INCLUDES.join(' and ')}, not ${safeCell(unknown)}`, 2);
      const c = await cli.client();
      const r = await c.plans.retryFailed(planId, {
        ...(o.id ? { id: o.id } : {}),
        ...(include ? { include: include as (typeof INCLUDES)[number][] } : {}),
      });
      const said = `Retrying what plan ${planId} did not get done with plan ${r.planId}`;
      if (!o.watch) return cli.print(() => said, r);
      if (!cli.options.json) cli.io.out(safeCell(said));
      cli.exitCode = await cli.watch(c, r.planId);
    });
}
