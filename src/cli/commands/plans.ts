import type { Command } from 'commander';
import type { Client } from '../../client/index.js';
import type { Cli } from '../context.js';
import { EMPTY_FILTER_SELECTS_NOTHING, filterOfFile, hasNoConstraint } from '../filters.js';
import { jobStatusName, safeCell } from '../format.js';
import { readJson } from '../input.js';
import { CliFailure } from '../failure.js';
import { count, positive, ratio } from '../options.js';
import { type PagingOptions, printPages } from '../paging.js';
import { dryRunText, planRow, previewText, showPlan } from '../plan-text.js';
import { addPlanExport } from './audit.js';
import { addApprovals } from './governance.js';
import { addPlanSteering } from './plan-steering.js';

type PlanFile = Parameters<Client['plans']['submit']>[0];

/** `wfa plans …`: try a plan out, submit it, follow it, read it, and steer it. */
export function registerPlans(program: Command, cli: Cli): void {
  const plans = program.command('plans').description('alteration plans');
  addTrials(plans, cli);
  addSubmit(plans, cli);
  addReads(plans, cli);
  addPlanSteering(plans, cli);
  addApprovals(plans, cli);
  addPlanExport(plans, cli);
}

/** dry-run and preview: what a plan would select and do, writing nothing. */
function addTrials(plans: Command, cli: Cli): void {
  plans
    .command('dry-run <file>')
    .description('the instances the filter of FILE ({alterations, filter} or a filter) matches')
    .action(async (file: string) => {
      const filter = filterOfFile(await readJson(file), file);
      const r = await (await cli.client()).plans.dryRun(filter);
      cli.print(() => dryRunText(r, hasNoConstraint(filter)), r);
    });
  plans
    .command('preview <file>')
    .description('what the plan in FILE would do to the first instances it matches; nothing is written')
    .option('--limit <n>', 'instances to preview (1 to 100)', count, 10)
    .action(async (file: string, o: { limit: number }) => {
      const body = await readJson<PlanFile>(file);
      const c = await cli.client();
      const r = await c.plans.preview({ alterations: body.alterations, filter: body.filter, limit: o.limit });
      cli.print(() => previewText(r, hasNoConstraint(body.filter)), r);
    });
}

interface SubmitOptions {
  id?: string;
  watch?: boolean;
  rate?: number;
  canary?: number;
  stopOnFailureRatio?: number;
  requireApproval?: boolean;
  notBefore?: string;
  schedule?: string;
  verify?: string;
  expect?: string;
  within?: number;
}

function addSubmit(plans: Command, cli: Cli): void {
  plans
    .command('submit <file>')
    .description('submit the plan in FILE ({alterations, filter}); --watch follows it to the end')
    .option('--id <id>', 'plan id (resubmitting the same id and body is idempotent)')
    .option('--watch', 'draw its progress until it ends; the exit code says how it ended')
    .option('--rate <n>', 'at most N instances per second', positive)
    .option('--canary <n>', 'process N instances first, then pause until resumed', positive)
    .option('--stop-on-failure-ratio <r>', 'pause when failed ÷ finished exceeds R (0 to 1)', ratio)
    .option('--require-approval', "ask for a second principal's approval, whatever the tenant's policy says")
    .option('--schedule <file>', "a schedule in FILE ({notBefore?, windows?}) instead of the plan file's")
    .option('--not-before <time>', 'start no earlier than this date-time with offset (2026-12-01T22:00:00+01:00)')
    .option('--verify <file>', "a verify in FILE ({expect, withinSeconds}) instead of the plan file's")
    .option('--expect <json>', 'verify: the filter each changed instance must come to match (JSON), with --within')
    .option('--within <seconds>', 'verify: within this many seconds of its job (1 to 86400), with --expect', positive)
    .action(async (file: string, o: SubmitOptions) => {
      const body = await readJson<PlanFile>(file);
      const verify = await verifyOf(o, body.verify);
      const c = await cli.client();
      // The options win over the file's rollout, control by control.
      const rollout = {
        ...body.rollout,
        ...(o.rate !== undefined ? { rate: o.rate } : {}),
        ...(o.canary !== undefined ? { canary: o.canary } : {}),
        ...(o.stopOnFailureRatio !== undefined ? { stopOnFailureRatio: o.stopOnFailureRatio } : {}),
      };
      // The file may carry a schedule (maintenance windows); --not-before sets or replaces its notBefore.
      const base = o.schedule !== undefined ? await readJson<PlanFile['schedule']>(o.schedule) : body.schedule;
      const schedule = o.notBefore !== undefined ? { ...base, notBefore: o.notBefore } : base;
      const { planId } = await c.plans.submit({
        ...body,
        ...(o.id ? { id: o.id } : {}),
        ...(Object.keys(rollout).length ? { rollout } : {}),
        ...(o.requireApproval ? { approval: { required: true as const } } : {}),
        ...(schedule ? { schedule } : {}),
        ...(verify ? { verify } : {}),
      });
      // Said beside the answer, not instead of it: the plan is stored and ends Completed with no jobs.
      if (hasNoConstraint(body.filter) && !cli.options.json)
        cli.io.err(`note: the plan will alter no instance: ${EMPTY_FILTER_SELECTS_NOTHING}`);
      if (!o.watch) return cli.print(() => `Submitted plan ${planId}`, { planId });
      if (!cli.options.json) cli.io.out(`Submitted plan ${safeCell(planId)}`);
      cli.exitCode = await cli.watch(c, planId);
    });
}

/**
 * The plan's verify as the options say it: a file (--verify), or --expect with --within (both, or a usage
 * failure), else the plan file's own.
 */
async function verifyOf(o: SubmitOptions, given: PlanFile['verify']): Promise<PlanFile['verify']> {
  if (o.verify !== undefined) return readJson<PlanFile['verify']>(o.verify);
  if (o.expect === undefined && o.within === undefined) return given;
  if (o.expect === undefined || o.within === undefined)
    throw new CliFailure('--expect and --within go together (or give --verify FILE)', 2, 'usage');
  let expect: unknown;
  try {
    expect = JSON.parse(o.expect);
  } catch (err) {
    throw new CliFailure(`--expect is not JSON: ${(err as Error).message}`, 2, 'usage');
  }
  return { expect, withinSeconds: o.within } as PlanFile['verify'];
}

/** watch, list, show and jobs: a plan as it runs and after. */
function addReads(plans: Command, cli: Cli): void {
  plans
    .command('watch <planId>')
    .description('draw the progress of a plan until it ends; exit 1 when it Failed or has failed jobs')
    .action(async (planId: string) => {
      cli.exitCode = await cli.watch(await cli.client(), planId);
    });
  plans
    .command('list')
    .description("the tenant's plans, newest first")
    .option('--status <status>', 'a status name or number')
    .option('--limit <n>', 'page size (1 to 100)', count, 20)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (o: { status?: string; limit: number } & PagingOptions) => {
      const c = await cli.client();
      const query = { ...(o.status ? { status: o.status } : {}), limit: o.limit };
      await printPages((after) => c.plans.list({ ...query, ...(after ? { after } : {}) }), o, cli.paging(), {
        columns: ['id', 'status', 'alterations', 'done', 'failed', 'total', 'created'],
        row: planRow,
        more: cli.more,
      });
    });
  plans
    .command('show <planId>')
    .description('a plan with a bar of its jobs by status')
    .action(async (planId: string) => {
      const r = await (await cli.client()).plans.get(planId);
      cli.print(() => showPlan(r.plan), r.plan);
    });
  addJobs(plans, cli);
}

function addJobs(plans: Command, cli: Cli): void {
  plans
    .command('jobs <planId>')
    .description("a page of a plan's jobs")
    .option('--failed', 'only failed jobs, with their log')
    .option('--log', "every job's verification (with verify) and log")
    .option('--limit <n>', 'page size (1 to 1000)', count, 100)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (planId: string, o: { failed?: boolean; log?: boolean; limit: number } & PagingOptions) => {
      const c = await cli.client();
      const query = { ...(o.failed ? { status: 'Failed' } : {}), limit: o.limit };
      await printPages((after) => c.plans.jobs(planId, { ...query, ...(after ? { after } : {}) }), o, cli.paging(), {
        columns: o.log
          ? ['instance', 'status', 'verification', 'log']
          : o.failed
            ? ['instance', 'status', 'log']
            : ['instance', 'status'],
        row: (j) => ({
          instance: j.workflowInstanceId,
          status: jobStatusName(j.status),
          verification: j.verification ?? '-',
          log: o.failed || o.log ? j.log.map((l) => l.message).join('; ') : undefined,
        }),
        more: cli.more,
      });
    });
}
