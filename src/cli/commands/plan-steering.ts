import type { Command } from 'commander';
import { ProblemError } from '../../client/index.js';
import type { Cli } from '../context.js';
import { CliFailure } from '../failure.js';
import { planStatusName, safeCell } from '../format.js';
import { positive, ratio } from '../options.js';
import { showPlan } from '../plan-text.js';

/** pause, resume, rollout, revert and cancel: a plan steered while it runs, or undone after. */
export function addPlanSteering(plans: Command, cli: Cli): void {
  plans
    .command('pause <planId>')
    .description('pause a plan: batches in flight finish, none starts until it is resumed')
    .action(async (planId: string) => {
      const r = await (await cli.client()).plans.pause(planId);
      cli.print(() => `Paused plan ${planId} (resume: wfa plans resume ${planId})`, r);
    });
  plans
    .command('resume <planId>')
    .description('resume a paused plan where it stopped (outside its maintenance windows: --ignore-schedule)')
    .option('--ignore-schedule', 'run now, outside its windows too, to its end (its schedule is dropped)')
    .action(async (planId: string, o: { ignoreSchedule?: boolean }) => {
      const client = await cli.client();
      const r = await client.plans
        .resume(planId, o.ignoreSchedule ? { ignoreSchedule: true } : {})
        .catch((err: unknown) => {
          throw inCliWords(err, planId);
        });
      cli.print(() => `Resumed plan ${planId}: ${planStatusName(r.status)}`, r);
    });
  addRollout(plans, cli);
  plans
    .command('revert <planId>')
    .description('revert a finished plan: a new plan restores each instance it changed and nothing changed since')
    .option('--id <id>', 'id of the revert plan (idempotent)')
    .option('--watch', 'draw the revert plan until it ends')
    .action(async (planId: string, o: { id?: string; watch?: boolean }) => {
      const c = await cli.client();
      const r = await c.plans.revert(planId, o.id ? { id: o.id } : {});
      if (!o.watch) return cli.print(() => `Reverting plan ${planId} with plan ${r.planId}`, r);
      if (!cli.options.json) cli.io.out(safeCell(`Reverting plan ${planId} with plan ${r.planId}`));
      cli.exitCode = await cli.watch(c, r.planId);
    });
  plans
    .command('cancel <planId>')
    .description('cancel a plan: pending jobs are cancelled, finished ones stay')
    .action(async (planId: string) => {
      const r = await (await cli.client()).plans.cancel(planId);
      cli.print(() => `Cancelled plan ${planId}`, r);
    });
}

function addRollout(plans: Command, cli: Cli): void {
  plans
    .command('rollout <planId>')
    .description("change a running or paused plan's rate or failure ratio, from its next batch")
    .option('--rate <n>', 'at most N instances per second', positive)
    .option('--no-rate', 'remove the rate limit')
    .option('--stop-on-failure-ratio <r>', 'pause when failed ÷ finished exceeds R (0 to 1)', ratio)
    .action(async (planId: string, o: { rate?: number | false; stopOnFailureRatio?: number }) => {
      const patch = {
        ...(o.rate === false ? { rate: null } : o.rate !== undefined ? { rate: o.rate } : {}),
        ...(o.stopOnFailureRatio !== undefined ? { stopOnFailureRatio: o.stopOnFailureRatio } : {}),
      };
      if (Object.keys(patch).length === 0)
        throw new CliFailure('Give --rate N, --no-rate or --stop-on-failure-ratio R', 2);
      const plan = await (await cli.client()).plans.rollout(planId, patch);
      cli.print(() => showPlan(plan), plan);
    });
}

/**
 * A resume refused outside the plan's windows: the API's advice, in words of no one client ("Resume it ignoring
 * the schedule (ignoreSchedule) …", src/alterations/plans.ts `RESUME_ADVICE`), with the CLI's command in their place.
 */
function inCliWords(err: unknown, planId: string): unknown {
  const advice = 'Resume it ignoring the schedule (ignoreSchedule)';
  if (!(err instanceof ProblemError) || err.status !== 409 || !err.detail.includes(advice)) return err;
  // An id that starts with "-" goes after "--", or it would be read as an option.
  const command = planId.startsWith('-')
    ? `wfa plans resume --ignore-schedule -- ${planId}`
    : `wfa plans resume ${planId} --ignore-schedule`;
  const detail = err.detail.replace(advice, () => `Resume with ${command}`);
  return new ProblemError(err.status, err.title, detail, err.errors, { ...err.problem, detail });
}
