import { type Command, Option } from 'commander';
import type { ApprovalPolicy } from '../../client/index.js';
import type { Cli } from '../context.js';
import { CliFailure } from '../failure.js';
import { planStatusName, safeCell, table } from '../format.js';
import { count } from '../options.js';
import { previewText } from '../plan-text.js';

/**
 * Change management from a terminal: the tenant's approval policy (`wfa policy`), a plan approved or rejected by
 * a second principal (`wfa plans approve|reject|review`), and a first draft of a Migrate's activity mappings
 * (`wfa definitions migration-draft`).
 */
export function addApprovals(plans: Command, cli: Cli): void {
  plans
    .command('review <planId>')
    .description('what a plan awaiting approval would do now to its first instances; nothing is written')
    .option('--limit <n>', 'instances to preview (1 to 100)', count, 10)
    .action(async (planId: string, o: { limit: number }) => {
      const r = await (await cli.client()).plans.previewStored(planId, o.limit);
      cli.print(() => previewText(r, false), r);
    });
  addDecisions(plans, cli);
}

/** approve and reject, under `wfa plans` and at the top (`wfa approve <planId>`). */
export function addDecisions(parent: Command, cli: Cli): void {
  for (const [verb, description] of [
    ['approve', 'approve a plan awaiting approval (not your own): it goes on as if just submitted'],
    ['reject', 'reject a plan awaiting approval: it ends Cancelled with no job'],
  ] as const) {
    parent
      .command(`${verb} <planId>`)
      .description(description)
      .option('--comment <text>', 'why, kept with the decision')
      .action(async (planId: string, o: { comment?: string }) => {
        const c = await cli.client();
        const body = o.comment !== undefined ? { comment: o.comment } : {};
        const r = verb === 'approve' ? await c.plans.approve(planId, body) : await c.plans.reject(planId, body);
        cli.print(
          () => `${verb === 'approve' ? 'Approved' : 'Rejected'} plan ${safeCell(planId)}: ${planStatusName(r.status)}`,
          r,
        );
      });
  }
}

/** `wfa policy`, and the change-management verbs at the top: `wfa approve|reject <planId>`, `wfa draft`. */
export function registerPolicy(program: Command, cli: Cli): void {
  addDecisions(program, cli);
  addMigrationDraft(program, cli, 'draft');
  const policy = program.command('policy').description("the tenant's approval policy for plans");
  policy
    .command('show')
    .description('when plans need a second principal’s approval, and for how long a request stands')
    .action(async () => {
      const p = await (await cli.client()).policy.get();
      cli.print(() => policyText(p), p);
    });
  policy
    .command('set')
    .description('change the policy; options not given keep their value')
    .addOption(
      new Option('--approval <when>', 'never, always, or above a threshold').choices(['never', 'always', 'above']),
    )
    .option('--threshold <n>', 'with --approval above: plans matching more than N instances', count)
    .option('--ttl <seconds>', 'how long a request for approval stands (60 to 2592000)', count)
    .action(async (o: { approval?: ApprovalPolicy['approval']; threshold?: number; ttl?: number }) => {
      if (o.approval === undefined && o.threshold === undefined && o.ttl === undefined)
        throw new CliFailure('Give --approval, --threshold or --ttl', 2);
      const c = await cli.client();
      const current = await c.policy.get();
      const approval = o.approval ?? current.approval;
      const next: ApprovalPolicy = {
        approval,
        approvalThreshold: approval === 'above' ? (o.threshold ?? current.approvalThreshold) : null,
        approvalTtlSeconds: o.ttl ?? current.approvalTtlSeconds,
      };
      const p = await c.policy.put(next);
      cli.print(() => policyText(p), p);
    });
}

function policyText(p: ApprovalPolicy): string {
  const when =
    p.approval === 'never'
      ? 'plans need approval only when their submitter asks for it'
      : p.approval === 'always'
        ? 'every plan needs approval by a second principal'
        : `plans matching more than ${p.approvalThreshold} instances need approval by a second principal`;
  return `${when}\na request for approval stands ${p.approvalTtlSeconds} s, then the plan is cancelled (Expired)`;
}

/** Under `wfa definitions` as migration-draft, and at the top as `wfa draft`. */
export function addMigrationDraft(parent: Command, cli: Cli, name = 'migration-draft'): void {
  parent
    .command(`${name} <definitionId>`)
    .description("a first draft of a Migrate's activityMappings from one version to another, to edit")
    .requiredOption('--from <version>', 'the version the instances run', count)
    .requiredOption('--to <version>', 'the version to migrate them to', count)
    .action(async (definitionId: string, o: { from: number; to: number }) => {
      const d = await (await cli.client()).definitions.migrationDraft(definitionId, o.from, o.to);
      cli.print(() => {
        const moved = d.mappings.filter((m) => m.source !== m.target);
        const lines = [
          `${safeCell(d.definitionId)} version ${d.from} → ${d.to}: ${d.mappings.length - moved.length} activities keep their id, ${moved.length} mapped by type and name, ${d.unmapped.length} unmapped`,
        ];
        if (moved.length)
          lines.push(
            '',
            table(
              moved.map((m) => ({ source: m.source, target: m.target, reason: m.reason })),
              ['source', 'target', 'reason'],
            ),
          );
        if (d.unmapped.length)
          lines.push(
            '',
            'unmapped (an instance waiting in one of these cannot migrate until you map it):',
            table(
              d.unmapped.map((u) => ({ activity: u.activityId, type: u.type, name: u.name ?? '' })),
              ['activity', 'type', 'name'],
            ),
          );
        lines.push('', 'the mappings as a Migrate takes them (--json prints the whole draft):');
        lines.push(
          JSON.stringify({
            type: 'Migrate',
            targetVersion: d.to,
            activityMappings: moved.map(({ source, target }) => ({ source, target })),
          }),
        );
        return lines.join('\n');
      }, d);
    });
}
