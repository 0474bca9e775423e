import { readFile } from 'node:fs/promises';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import {
  type Client,
  type ClientOptions,
  createClient,
  type PlanSummaryView,
  type PlanView,
  type RunResultView,
} from '../client/index.js';
import {
  type CliEnvironment,
  type Credentials,
  cliEnvironment,
  loadCredentials,
  removeCredentials,
  saveCredentials,
} from './credentials.js';
import { CliFailure, exitCodeOf, humanProblem, jsonProblem, problemOf } from './failure.js';
import {
  jobStatusName,
  n,
  planOutcome,
  planStatusName,
  safeCell,
  safeText,
  shellWord,
  stackedBar,
  table,
} from './format.js';
import { nextPageCommand, type PagingOptions, printPages } from './paging.js';
import { readHidden } from './prompt.js';
import { type Target, targetOf, targetProblem } from './target.js';
import { watchPlan } from './watch.js';

/**
 * `wfa`: the service from a terminal. Human tables by default, `--json` for scripts; a failure prints the
 * problem's detail and the paths of the offending fields (src/cli/failure.ts), never a stack.
 */

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  isTty: boolean;
}

/** An answer larger than this is refused (a plan with its first 1,000 jobs is a few MB at most). */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** The service sends a keep-alive on an event stream every 15 s: four missed ones mean it is gone. */
const STREAM_IDLE_MS = 60_000;

type Bounds = Pick<ClientOptions, 'timeoutMs' | 'maxResponseBytes' | 'streamIdleTimeoutMs'>;

export async function runCli(
  argv: string[],
  env: CliEnvironment = cliEnvironment(),
  io: Io = defaultIo(),
): Promise<number> {
  let exitCode = 0;
  /** Where the CLI talks to, once known: failures name it. */
  let target: Target | undefined;
  const program = new Command('wfa')
    .description('Bulk, safe alterations of workflow instances: the CLI of workflow-alterations')
    .option('--url <url>', 'the service URL (WFA_URL; default: the one `wfa login` stored, else http://localhost:3000)')
    .option('--json', 'machine-readable JSON output; a failure is {"error": {…}} on standard error')
    .option('--timeout <seconds>', 'how long a request may take', positive, 60)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.out(s.replace(/\n$/, '')),
      writeErr: (s) => io.err(s.replace(/\n$/, '')),
      // A usage error (unknown option, missing argument) is a problem like any other under --json.
      outputError: (s, write) =>
        write(wantsJson() ? jsonProblem(problemOf(new CliFailure(s.replace(/^error: /, '').trim(), 2), target)) : s),
    });

  const opts = () => program.opts<{ url?: string; json?: boolean; timeout: number }>();
  /** --json, also when commander stopped before reading it (an error in the arguments before it). */
  const wantsJson = () => Boolean(opts().json) || optionWords(argv).includes('--json');
  /** What the CLI reads of a server, broken or hostile: a time limit per request and a size limit per answer. */
  const bounds = (): Bounds => ({
    timeoutMs: opts().timeout * 1000,
    maxResponseBytes: MAX_RESPONSE_BYTES,
    streamIdleTimeoutMs: STREAM_IDLE_MS,
  });
  // Human output is shown, never obeyed: control characters from the server or stored data are escaped.
  const print = (human: () => string, json: unknown) =>
    io.out(opts().json ? JSON.stringify(json, null, 2) : safeText(human()));
  const client = async () => {
    const stored = await loadCredentials(env.configDir);
    target = checked(targetOf(opts().url, env.url, stored?.url));
    return connect(env, stored, target.url, bounds());
  };
  /** How to follow a plan again (after Ctrl-C), with the --url this command was given. */
  const watchAgain = (planId: string) =>
    ['wfa', ...(opts().url ? ['--url', opts().url!] : []), 'plans', 'watch', planId].map(shellWord).join(' ');
  const watch = (c: Client, planId: string) =>
    watchPlan(c, planId, { json: Boolean(opts().json), ...io, watchAgain: watchAgain(planId) });
  const paging = () => ({ json: Boolean(opts().json), out: io.out, err: io.err });
  const more = (cursor: string) => nextPageCommand(argv, cursor);

  program
    .command('login')
    .description('sign in and store the credentials (0600) under ~/.config/wfa; WFA_URL and WFA_API_KEY override them')
    .option('--username <name>', 'user name', 'admin')
    .option(
      '--password <password>',
      'password (or WFA_PASSWORD; else asked for on a terminal, or one line read from standard input)',
    )
    .option('--api-key <key>', 'store this API key instead of signing in')
    .action(async (o: { username: string; password?: string; apiKey?: string }) => {
      target = checked(targetOf(opts().url, env.url));
      const url = target.url;
      if (o.apiKey) {
        const c = createClient({ ...bounds(), baseUrl: url, apiKey: o.apiKey });
        await c.identity.permissions();
        const file = await saveCredentials(env.configDir, { url, apiKey: o.apiKey });
        return print(() => `Stored the API key for ${url} in ${file}`, { url, file });
      }
      const password =
        o.password ??
        env.password ??
        (process.stdin.isTTY
          ? await readHidden(
              `Password for ${safeCell(o.username)} at ${safeCell(url)}: `,
              process.stdin,
              process.stderr,
            )
          : await readStdinLine());
      if (!password)
        throw new CliFailure('No password: pass --password, set WFA_PASSWORD, or pipe it on standard input', 2);
      const tokens = await createClient({ ...bounds(), baseUrl: url }).identity.login(o.username, password);
      const file = await saveCredentials(env.configDir, {
        url,
        accessToken: tokens.accessToken,
        refreshToken: tokens.refreshToken,
        accessTokenExpiresAt: Date.now() + tokens.expiresIn * 1000,
      });
      print(() => `Signed in to ${url} as ${o.username}; credentials in ${file}`, { url, file });
    });

  program
    .command('logout')
    .description('sign out and remove the stored credentials')
    .action(async () => {
      const stored = await loadCredentials(env.configDir);
      if (stored?.accessToken) await (await client()).identity.logout(stored.refreshToken).catch(() => undefined);
      await removeCredentials(env.configDir);
      print(() => 'Signed out', { ok: true });
    });

  const definitions = program.command('definitions').description('workflow definitions');
  definitions
    .command('publish <file>')
    .description('publish the next version of the definition in FILE (version 3 JSON)')
    .action(async (file: string) => {
      const d = await (await client()).definitions.publish(await readJson(file));
      print(() => `Published ${d.definitionId} version ${d.version} (${d.id})`, d);
    });
  definitions
    .command('list')
    .description('the latest version of each definition')
    .action(async () => {
      const r = await (await client()).definitions.list();
      print(
        () =>
          table(
            r.items.map((d) => ({ id: d.definitionId, version: d.version, name: d.name, created: d.createdAt })),
            ['id', 'version', 'name', 'created'],
          ),
        r,
      );
    });

  const instances = program.command('instances').description('workflow instances');
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
    .action(
      async (
        o: { definition?: string; status?: string; subStatus?: string; search?: string; limit: number } & PagingOptions,
      ) => {
        const c = await client();
        const query = {
          ...(o.definition ? { definitionId: o.definition } : {}),
          ...(o.status ? { status: o.status } : {}),
          ...(o.subStatus ? { subStatus: o.subStatus } : {}),
          ...(o.search ? { searchTerm: o.search } : {}),
          limit: o.limit,
        };
        await printPages((after) => c.instances.list({ ...query, ...(after ? { after } : {}) }), o, paging(), {
          columns: ['id', 'definition', 'status', 'correlation', 'incidents', 'updated'],
          row: (i) => ({
            id: i.id,
            definition: `${i.definitionId} v${i.version}`,
            status: `${i.status}/${i.subStatus}`,
            correlation: i.correlationId,
            incidents: i.incidentCount,
            updated: i.updatedAt,
          }),
          more,
        });
      },
    );
  instances
    .command('start <definitionId>')
    .description('start an instance of the latest version of a definition')
    .option('--correlation-id <id>', 'a correlation id')
    .option('--name <name>', 'a name')
    .action(async (definitionId: string, o: { correlationId?: string; name?: string }) => {
      const r = await (
        await client()
      ).instances.start({
        definitionId,
        ...(o.correlationId ? { correlationId: o.correlationId } : {}),
        ...(o.name ? { name: o.name } : {}),
      });
      print(() => r.workflowInstanceId, r);
    });
  program
    .command('trigger <eventName>')
    .description('resume the instances waiting on an event')
    .option('--correlation-id <id>', 'only the instance with this correlation id')
    .option('--instance <id>', 'only this instance')
    .action(async (eventName: string, o: { correlationId?: string; instance?: string }) => {
      const r = await (
        await client()
      ).instances.trigger(eventName, {
        ...(o.correlationId ? { correlationId: o.correlationId } : {}),
        ...(o.instance ? { workflowInstanceId: o.instance } : {}),
      });
      const n = r.resumedWorkflowInstanceIds.length;
      print(
        () =>
          r.resumption === 'recorded'
            ? `Resuming ${n} instance(s): recorded, the workers resume them next`
            : `Resumed ${n} instance(s)`,
        { resumedWorkflowInstanceIds: r.resumedWorkflowInstanceIds },
      );
    });
  instances
    .command('show <id>')
    .description('an instance with its variables, incidents and journal')
    .action(async (id: string) => {
      const i = await (await client()).instances.get(id);
      print(
        () =>
          [
            safeCell(`${i.id}  ${i.definitionId} v${i.version}  ${i.status}/${i.subStatus}`),
            '',
            table(
              i.variables.map((v) => ({ variable: v.id, type: v.typeName, value: v.value })),
              ['variable', 'type', 'value'],
            ),
            ...(i.incidents.length
              ? ['', table(i.incidents, ['activityId', 'activityType', 'message', 'timestamp'])]
              : []),
            ...(i.bookmarks.length
              ? ['', `Waiting on: ${safeCell(i.bookmarks.map((b) => `${b.eventName} (${b.activityId})`).join(', '))}`]
              : []),
          ].join('\n'),
        i,
      );
    });

  const plans = program.command('plans').description('alteration plans');
  plans
    .command('dry-run <file>')
    .description('the instances the filter of FILE ({alterations, filter} or a filter) matches')
    .action(async (file: string) => {
      const body = await readJson<Record<string, unknown>>(file);
      const filter = (body.filter ?? body) as Parameters<Client['plans']['dryRun']>[0];
      const r = await (await client()).plans.dryRun(filter);
      print(
        () =>
          [
            `${n(r.workflowInstanceIds.length)} instances match`,
            ...r.workflowInstanceIds.slice(0, 20),
            ...(r.workflowInstanceIds.length > 20 ? ['…'] : []),
          ].join('\n'),
        r,
      );
    });
  plans
    .command('preview <file>')
    .description('what the plan in FILE would do to the first instances it matches; nothing is written')
    .option('--limit <n>', 'instances to preview (1 to 100)', count, 10)
    .action(async (file: string, o: { limit: number }) => {
      const body = await readJson<Parameters<Client['plans']['submit']>[0]>(file);
      const r = await (
        await client()
      ).plans.preview({ alterations: body.alterations, filter: body.filter, limit: o.limit });
      print(
        () =>
          [
            `${n(r.matchedCount)} instances match; the first ${r.items.length}:`,
            ...r.items.flatMap((i) => [
              `  ${safeCell(i.workflowInstanceId)}  ${i.isSuccessful ? 'ok' : `fails: ${safeCell(i.log.map((l) => l.message).join('; '))}`}`,
              ...i.changes.map(
                (ch) =>
                  `    ${safeCell(ch.path)}: ${safeCell(JSON.stringify(ch.before))} → ${safeCell(JSON.stringify(ch.after))}`,
              ),
            ]),
          ].join('\n'),
        r,
      );
    });
  plans
    .command('submit <file>')
    .description('submit the plan in FILE ({alterations, filter}); --watch follows it to the end')
    .option('--id <id>', 'plan id (resubmitting the same id and body is idempotent)')
    .option('--watch', 'draw its progress until it ends; the exit code says how it ended')
    .option('--rate <n>', 'at most N instances per second', positive)
    .option('--canary <n>', 'process N instances first, then pause until resumed', positive)
    .option('--stop-on-failure-ratio <r>', 'pause when failed ÷ finished exceeds R (0 to 1)', ratio)
    .action(
      async (
        file: string,
        o: { id?: string; watch?: boolean; rate?: number; canary?: number; stopOnFailureRatio?: number },
      ) => {
        const body = await readJson<Parameters<Client['plans']['submit']>[0]>(file);
        const c = await client();
        const rollout = {
          ...body.rollout,
          ...(o.rate !== undefined ? { rate: o.rate } : {}),
          ...(o.canary !== undefined ? { canary: o.canary } : {}),
          ...(o.stopOnFailureRatio !== undefined ? { stopOnFailureRatio: o.stopOnFailureRatio } : {}),
        };
        const { planId } = await c.plans.submit({
          ...body,
          ...(o.id ? { id: o.id } : {}),
          ...(Object.keys(rollout).length ? { rollout } : {}),
        });
        if (!o.watch) return print(() => `Submitted plan ${planId}`, { planId });
        if (!opts().json) io.out(`Submitted plan ${safeCell(planId)}`);
        exitCode = await watch(c, planId);
      },
    );
  plans
    .command('watch <planId>')
    .description('draw the progress of a plan until it ends; exit 1 when it Failed or has failed jobs')
    .action(async (planId: string) => {
      exitCode = await watch(await client(), planId);
    });
  plans
    .command('list')
    .description("the tenant's plans, newest first")
    .option('--status <status>', 'a status name or number')
    .option('--limit <n>', 'page size (1 to 100)', count, 20)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (o: { status?: string; limit: number } & PagingOptions) => {
      const c = await client();
      await printPages(
        (after) =>
          c.plans.list({ ...(o.status ? { status: o.status } : {}), limit: o.limit, ...(after ? { after } : {}) }),
        o,
        paging(),
        { columns: ['id', 'status', 'alterations', 'done', 'failed', 'total', 'created'], row: planRow, more },
      );
    });
  plans
    .command('show <planId>')
    .description('a plan with a bar of its jobs by status')
    .action(async (planId: string) => {
      const r = await (await client()).plans.get(planId);
      print(() => showPlan(r.plan), r.plan);
    });
  plans
    .command('jobs <planId>')
    .description("a page of a plan's jobs")
    .option('--failed', 'only failed jobs, with their log')
    .option('--limit <n>', 'page size (1 to 1000)', count, 100)
    .option('--after <cursor>', 'the page after this cursor (as the hint of the previous page gives it)')
    .option('--all', 'every page to the end, printed as they arrive')
    .action(async (planId: string, o: { failed?: boolean; limit: number } & PagingOptions) => {
      const c = await client();
      const query = { ...(o.failed ? { status: 'Failed' } : {}), limit: o.limit };
      await printPages((after) => c.plans.jobs(planId, { ...query, ...(after ? { after } : {}) }), o, paging(), {
        columns: o.failed ? ['instance', 'status', 'log'] : ['instance', 'status'],
        row: (j) => ({
          instance: j.workflowInstanceId,
          status: jobStatusName(j.status),
          log: o.failed ? j.log.map((l) => l.message).join('; ') : undefined,
        }),
        more,
      });
    });
  plans
    .command('pause <planId>')
    .description('pause a plan: batches in flight finish, none starts until it is resumed')
    .action(async (planId: string) => {
      const r = await (await client()).plans.pause(planId);
      print(() => `Paused plan ${planId} (resume: wfa plans resume ${planId})`, r);
    });
  plans
    .command('resume <planId>')
    .description('resume a paused plan where it stopped')
    .action(async (planId: string) => {
      const r = await (await client()).plans.resume(planId);
      print(() => `Resumed plan ${planId}: ${planStatusName(r.status)}`, r);
    });
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
      const plan = await (await client()).plans.rollout(planId, patch);
      print(() => showPlan(plan), plan);
    });
  plans
    .command('revert <planId>')
    .description('revert a finished plan: a new plan restores each instance it changed and nothing changed since')
    .option('--id <id>', 'id of the revert plan (idempotent)')
    .option('--watch', 'draw the revert plan until it ends')
    .action(async (planId: string, o: { id?: string; watch?: boolean }) => {
      const c = await client();
      const r = await c.plans.revert(planId, o.id ? { id: o.id } : {});
      if (!o.watch) return print(() => `Reverting plan ${planId} with plan ${r.planId}`, r);
      if (!opts().json) io.out(safeCell(`Reverting plan ${planId} with plan ${r.planId}`));
      exitCode = await watch(c, r.planId);
    });
  plans
    .command('cancel <planId>')
    .description('cancel a plan: pending jobs are cancelled, finished ones stay')
    .action(async (planId: string) => {
      const r = await (await client()).plans.cancel(planId);
      print(() => `Cancelled plan ${planId}`, r);
    });

  program
    .command('run <file> <instanceIds...>')
    .description('apply the alterations of FILE ({alterations}) to these instances now, one result each')
    .action(async (file: string, instanceIds: string[]) => {
      const body = await readJson<{ alterations: Parameters<Client['plans']['run']>[1] }>(file);
      const r = await (await client()).plans.run(instanceIds, body.alterations);
      print(() => results(r.results), r);
      if (r.results.some((x) => !x.isSuccessful)) exitCode = 1;
    });
  program
    .command('retry <instanceIds...>')
    .description('schedule the faulted activities of these instances again (or only --activity)')
    .option('--activity <id...>', 'only these activities')
    .action(async (instanceIds: string[], o: { activity?: string[] }) => {
      const r = await (await client()).plans.retry(instanceIds, o.activity);
      print(() => results(r.results), r);
      if (r.results.some((x) => !x.isSuccessful)) exitCode = 1;
    });

  const connections = program.command('connections').description('connections to external systems');
  connections.command('list').action(async () => {
    const r = await (await client()).connections.list();
    print(
      () =>
        table(
          r.items.map((c) => ({ id: c.id, name: c.name, type: c.connectionType, tenant: c.tenantId ?? 'default' })),
          ['id', 'name', 'type', 'tenant'],
        ),
      r,
    );
  });
  connections
    .command('create <file>')
    .description('create the connection in FILE ({name, connectionType, connectionConfiguration})')
    .action(async (file: string) => {
      const created = await (await client()).connections.create(await readJson(file));
      print(() => `Created connection ${created.name} (${created.id})`, created);
    });
  connections.command('delete <id>').action(async (id: string) => {
    await (await client()).connections.delete(id);
    print(() => `Deleted connection ${id}`, { id });
  });

  try {
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    const problem = problemOf(err, target);
    io.err(wantsJson() ? jsonProblem(problem) : humanProblem(problem));
    return exitCodeOf(err);
  }
}

function results(items: RunResultView[]): string {
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

function planRow(p: PlanSummaryView) {
  const c = p.jobCounts;
  return {
    id: p.id,
    status: planOutcome(p.status, c),
    // The summary names its alterations' types, not the alterations (`plans show` reads the plan).
    alterations: p.revertOf ? `reverts ${p.revertOf}` : `${n(p.alterationCount)}: ${p.alterationTypes.join(', ')}`,
    done: n(c.completed),
    failed: n(c.failed),
    total: n(c.total),
    created: p.createdAt,
  };
}

/** The arguments before `--` (after it, `--json` is an operand). */
function optionWords(argv: string[]): string[] {
  const end = argv.indexOf('--');
  return end < 0 ? argv : argv.slice(0, end);
}

/** A positive number option (commander parser). */
function positive(value: string): number {
  const v = Number(value);
  if (!Number.isFinite(v) || v <= 0) throw new InvalidArgumentError('Expected a positive number.');
  return v;
}

/** A whole number option of 1 or more (commander parser). */
function count(value: string): number {
  const v = Number(value);
  if (!Number.isInteger(v) || v < 1) throw new InvalidArgumentError('Expected a whole number of 1 or more.');
  return v;
}

/** A ratio option from 0 to 1. */
function ratio(value: string): number {
  const v = Number(value);
  if (!Number.isFinite(v) || v < 0 || v > 1) throw new InvalidArgumentError('Expected a number from 0 to 1.');
  return v;
}

function showPlan(p: PlanView): string {
  const c = p.jobCounts;
  const bar = stackedBar(
    [
      { value: c.completed, char: '█' },
      { value: c.failed, char: '▓' },
      { value: c.cancelled, char: '▒' },
    ],
    c.total,
  );
  const r = p.rollout;
  const rollout = r
    ? [
        r.rate != null ? `rate ${n(r.rate)}/s` : '',
        r.canary != null ? `canary ${n(r.canary)}` : '',
        r.stopOnFailureRatio != null ? `stop on failures above ${r.stopOnFailureRatio}` : '',
      ].filter(Boolean)
    : [];
  return [
    `${safeCell(p.id)}  ${planOutcome(p.status, c)}${p.pauseReason ? ` (${safeCell(p.pauseReason)})` : ''}${p.failureReason ? `: ${safeCell(p.failureReason)}` : ''}`,
    `  ${p.revertOf ? `reverts plan ${safeCell(p.revertOf)}` : p.alterations.map((a) => safeCell(a.type)).join(', ')}`,
    ...(rollout.length ? [`  rollout: ${rollout.join(', ')}`] : []),
    `  ${bar}  ${n(c.completed + c.failed + c.cancelled)}/${n(c.total)}`,
    `  █ completed ${n(c.completed)}   ▓ failed ${n(c.failed)}   ▒ cancelled ${n(c.cancelled)}   ░ pending ${n(c.pending)}`,
    `  created ${p.createdAt}${p.completedAt ? `, finished ${p.completedAt}` : ''}`,
  ].join('\n');
}

/** The target, or a usage failure (exit 2) that says what is wrong with its URL. */
function checked(t: Target): Target {
  const problem = targetProblem(t);
  if (problem) throw new CliFailure(problem, 2, 'bad-url');
  return t;
}

/** WFA_API_KEY, else the stored key or token (refreshed when it expired). */
async function connect(
  env: CliEnvironment,
  stored: Credentials | undefined,
  baseUrl: string,
  bounds: Bounds,
): Promise<Client> {
  if (env.apiKey) return createClient({ ...bounds, baseUrl, apiKey: env.apiKey });
  if (stored?.apiKey) return createClient({ ...bounds, baseUrl, apiKey: stored.apiKey });
  if (stored?.accessToken) {
    if ((stored.accessTokenExpiresAt ?? 0) - 30_000 > Date.now() || !stored.refreshToken)
      return createClient({ ...bounds, baseUrl, accessToken: stored.accessToken });
    const tokens = await createClient({ ...bounds, baseUrl }).identity.refresh(stored.refreshToken);
    await saveCredentials(env.configDir, {
      url: stored.url,
      accessToken: tokens.accessToken,
      refreshToken: tokens.refreshToken,
      accessTokenExpiresAt: Date.now() + tokens.expiresIn * 1000,
    });
    return createClient({ ...bounds, baseUrl, accessToken: tokens.accessToken });
  }
  throw new CliFailure('Not signed in: run `wfa login` (or set WFA_API_KEY)', 2, 'not-signed-in');
}

async function readJson<T = unknown>(file: string): Promise<T> {
  let text: string;
  try {
    text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  } catch (err) {
    throw new CliFailure(
      `Cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`,
      2,
      'bad-file',
    );
  }
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new CliFailure(`${file} is not JSON: ${(err as Error).message}`, 2, 'bad-file');
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function readStdinLine(): Promise<string | undefined> {
  if (process.stdin.isTTY) return undefined;
  return (await readStdin()).split(/\r?\n/)[0] || undefined;
}

function defaultIo(): Io {
  return {
    out: (t) => process.stdout.write(`${t}\n`),
    err: (t) => process.stderr.write(`${t}\n`),
    isTty: Boolean(process.stdout.isTTY),
  };
}
