import type { Command } from 'commander';
import type { InstanceSummary, InstanceView } from '../../client/index.js';
import type { Cli } from '../context.js';
import { jobStatusName, safeCell, table } from '../format.js';
import { count } from '../options.js';
import { type PagingOptions, printPages } from '../paging.js';

/** `wfa instances …` (list, start, show) and `wfa trigger`. */
export function registerInstances(program: Command, cli: Cli): void {
  const instances = program.command('instances').description('workflow instances');
  addList(instances, cli);
  instances
    .command('start <definitionId>')
    .description('start an instance of the latest version of a definition')
    .option('--correlation-id <id>', 'a correlation id')
    .option('--name <name>', 'a name')
    .action(async (definitionId: string, o: { correlationId?: string; name?: string }) => {
      const r = await (
        await cli.client()
      ).instances.start({
        definitionId,
        ...(o.correlationId ? { correlationId: o.correlationId } : {}),
        ...(o.name ? { name: o.name } : {}),
      });
      cli.print(() => r.workflowInstanceId, r);
    });
  addTrigger(program, cli);
  instances
    .command('changes <id>')
    .description('every plan job that touched an instance, newest first')
    .option('--limit <n>', 'changes per page (1 to 100)', count, 20)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (id: string, o: PagingOptions & { limit: number }) => {
      const c = await cli.client();
      await printPages(
        (after) => c.instances.changes(id, { limit: o.limit, ...(after ? { after } : {}) }),
        o,
        cli.paging(),
        {
          columns: ['plan', 'status', 'verification', 'alterations', 'completed', 'log'],
          row: (ch) => ({
            plan: ch.planId,
            status: jobStatusName(ch.status),
            verification: ch.verification ?? '-',
            alterations: ch.alterationTypes.join(', '),
            completed: ch.completedAt ?? '-',
            log: ch.log.at(-1)?.message ?? '',
          }),
          more: cli.more,
        },
      );
    });
  instances
    .command('show <id>')
    .description('an instance with its variables, incidents and journal')
    .action(async (id: string) => {
      const i = await (await cli.client()).instances.get(id);
      cli.print(() => instanceText(i), i);
    });
}

interface ListOptions extends PagingOptions {
  definition?: string;
  status?: string;
  subStatus?: string;
  search?: string;
  limit: number;
}

function addList(instances: Command, cli: Cli): void {
  instances
    .command('list')
    .description("a page of the tenant's instances, newest first")
    .option('--definition <id>', 'only this definition')
    .option('--status <status>', 'Running or Finished')
    .option('--sub-status <subStatus>', 'Pending, Executing, Suspended, Finished, Cancelled or Faulted')
    .option('--search <term>', 'substring of id, name, correlation id or definition')
    .option('--limit <n>', 'page size (1 to 1000)', count, 50)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (o: ListOptions) => {
      const c = await cli.client();
      const query = {
        ...(o.definition ? { definitionId: o.definition } : {}),
        ...(o.status ? { status: o.status } : {}),
        ...(o.subStatus ? { subStatus: o.subStatus } : {}),
        ...(o.search ? { searchTerm: o.search } : {}),
        limit: o.limit,
      };
      await printPages((after) => c.instances.list({ ...query, ...(after ? { after } : {}) }), o, cli.paging(), {
        columns: ['id', 'definition', 'status', 'correlation', 'incidents', 'updated'],
        row: instanceRow,
        more: cli.more,
      });
    });
}

function addTrigger(program: Command, cli: Cli): void {
  program
    .command('trigger <eventName>')
    .description('resume the instances waiting on an event')
    .option('--correlation-id <id>', 'only the instance with this correlation id')
    .option('--instance <id>', 'only this instance')
    .action(async (eventName: string, o: { correlationId?: string; instance?: string }) => {
      const r = await (
        await cli.client()
      ).instances.trigger(eventName, {
        ...(o.correlationId ? { correlationId: o.correlationId } : {}),
        ...(o.instance ? { workflowInstanceId: o.instance } : {}),
      });
      const n = r.resumedWorkflowInstanceIds.length;
      cli.print(
        () =>
          r.resumption === 'recorded'
            ? `Resuming ${n} instance(s): recorded, the workers resume them next`
            : `Resumed ${n} instance(s)`,
        { resumedWorkflowInstanceIds: r.resumedWorkflowInstanceIds },
      );
    });
}

function instanceRow(i: InstanceSummary) {
  return {
    id: i.id,
    definition: `${i.definitionId} v${i.version}`,
    status: `${i.status}/${i.subStatus}`,
    correlation: i.correlationId,
    incidents: i.incidentCount,
    updated: i.updatedAt,
  };
}

/** An instance: its status, variables, incidents and what it waits on. */
function instanceText(i: InstanceView): string {
  return [
    safeCell(`${i.id}  ${i.definitionId} v${i.version}  ${i.status}/${i.subStatus}`),
    '',
    i.variables.length
      ? table(
          i.variables.map((v) => ({ variable: v.id, type: v.typeName, value: v.value })),
          ['variable', 'type', 'value'],
        )
      : 'No variables.',
    ...(i.incidents.length
      ? ['', 'Incidents:', table(i.incidents, ['activityId', 'activityType', 'message', 'timestamp'])]
      : []),
    ...(i.bookmarks.length
      ? ['', `Waiting on: ${safeCell(i.bookmarks.map((b) => `${b.eventName} (${b.activityId})`).join(', '))}`]
      : []),
  ].join('\n');
}
