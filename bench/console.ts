/**
 * The console with a plan of a million jobs: `npm run bench:console` (CONSOLE_N, default 1,000,000).
 *
 * Starts an embedded Postgres and a Temporal dev server, runs the service as its own process, seeds N
 * suspended instances (one INSERT ... SELECT) and submits a plan over all of them with a canary of 2,000:
 * its jobs are generated (N of them), 2,000 run, and it pauses. Then, signed in to the console as a user
 * (the sign-in form's post, its cookie), it measures what an operator waits for:
 *   - the plan's page (status, counts, the first page of jobs), as HTML over HTTP, CONSOLE_RUNS times;
 *   - the same page with the Pending and the Failed jobs on their own;
 *   - the plan's event stream until its first `progress` event (the live status and counts);
 *   - the Plans list;
 *   - with Chromium (CHROMIUM_PATH, default /usr/bin/chromium), the page in a browser until its status and
 *     counts are shown (navigation to DOMContentLoaded, the stylesheets and the script loaded);
 *   - after CONSOLE_FAULTED (50,000) of the instances faulted in CONSOLE_GROUPS (20) incident groups: the Dashboard
 *     and the definition's drawing with its counts per step, as HTML and in Chromium until their numbers show.
 * Results on stdout and in bench/results/console-latest.json; the contract's target is under a second.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { loadConfig } from '../src/config.js';
import { startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { createLogger } from '../src/logger.js';
import { startDevServer } from '../src/temporal/devserver.js';
import { installTemporalRuntime } from '../src/temporal/runtime.js';
import { freePort } from '../test/support/free-port.js';
import { DEFINITION, FAULT_SQL, SEED_SQL } from './size/settings.js';
import { dbUrl, recreateDatabase, round, seedWithoutWorkflows, sleep } from './util.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS_FILE = process.env.CONSOLE_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'console-latest.json');
const N = Number(process.env.CONSOLE_N ?? 1_000_000);
const RUNS = Number(process.env.CONSOLE_RUNS ?? 10);
const CANARY = 2_000;
/** Of the N instances, how many have an incident (after the plan paused), in how many groups. */
const FAULTED = Number(process.env.CONSOLE_FAULTED ?? 50_000);
const GROUPS = Number(process.env.CONSOLE_GROUPS ?? 20);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const PASSWORD = 'bench-console-password';
const log = (msg: string) => process.stdout.write(`[console] ${msg}\n`);

const summary = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { medianMs: round(s[Math.floor(s.length / 2)]!), maxMs: round(s[s.length - 1]!), runs: s.length };
};

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger('warn');
  await installTemporalRuntime(logger);
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-console-bench-'));
  const stops: (() => Promise<unknown>)[] = [() => rm(work, { recursive: true, force: true })];
  let service: ChildProcess | undefined;
  try {
    const pgPort = Number(process.env.BENCH_PG_PORT ?? 54351);
    const postgres = await startEmbeddedPostgres({
      dataDir: path.join(os.tmpdir(), 'wfa-console-bench', 'postgres'),
      port: pgPort,
      database: 'postgres',
      logger,
    });
    stops.unshift(() => postgres.stop());
    const temporal = await startDevServer({
      cliPath: config.temporal.cliPath,
      cacheDir: config.cacheDir,
      dbFilename: path.join(work, 'temporal.sqlite'),
      namespace: 'default',
      port: await freePort(),
      uiPort: 0,
    });
    stops.unshift(() => temporal.teardown());
    await recreateDatabase(postgres.adminUrl, 'wfa_console_bench');
    const databaseUrl = dbUrl(postgres.adminUrl, 'wfa_console_bench');

    const port = await freePort();
    const adminKey = `wfa_console_${randomBytes(16).toString('hex')}`;
    service = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src', 'main.ts')], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        DATA_DIR: path.join(work, 'data'),
        DATABASE_URL: databaseUrl,
        TEMPORAL_ADDRESS: temporal.address,
        TEMPORAL_TASK_QUEUE: `console-bench-${process.pid}`,
        ADMIN_API_KEY: adminKey,
        AUTH_SIGNING_KEY: randomBytes(32).toString('base64url'),
        LOG_LEVEL: 'warn',
        MALLOC_ARENA_MAX: '2',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const exited = new Promise<void>((resolve) => service!.once('exit', () => resolve()));
    stops.unshift(async () => {
      service?.kill('SIGTERM');
      await exited;
    });
    const base = `http://127.0.0.1:${port}`;
    for (const deadline = Date.now() + 120_000; ;) {
      if (
        await fetch(`${base}/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (Date.now() > deadline || service.exitCode !== null) throw new Error('the service did not become healthy');
      await sleep(250);
    }
    const call = async <T = any>(method: string, p: string, body?: unknown) => {
      const res = await fetch(`${base}${p}`, {
        method,
        headers: { authorization: `ApiKey ${adminKey}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${p}: HTTP ${res.status} ${text.slice(0, 300)}`);
      return (text ? JSON.parse(text) : undefined) as T;
    };

    log(`seeding ${N.toLocaleString('en-US')} instances`);
    const def = await call<{ id: string }>('POST', '/workflow-definitions', DEFINITION);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    let t = performance.now();
    await seedWithoutWorkflows(db, SEED_SQL, [def.id, N]);
    await db.query('VACUUM ANALYZE workflow_instances');
    log(`seeded in ${round((performance.now() - t) / 1000)} s`);

    t = performance.now();
    const planId = 'million';
    await call('POST', '/alterations/submit', {
      id: planId,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
      filter: { definitionIds: [DEFINITION.definitionId] },
      rollout: { canary: CANARY },
    });
    for (;;) {
      const [plan] = (await call<{ items: { id: string; status: number }[] }>('GET', '/alterations?limit=1')).items;
      if (plan?.id === planId && plan.status === 7) break;
      if (plan?.status === 5) throw new Error('the plan failed');
      await sleep(500);
    }
    log(
      `plan of ${N.toLocaleString('en-US')} jobs generated, ${CANARY} run, paused: ${round((performance.now() - t) / 1000)} s`,
    );
    // The Dashboard's and the drawing's numbers: FAULTED of them with an incident, in GROUPS groups.
    await seedWithoutWorkflows(db, FAULT_SQL, [Math.floor(N / FAULTED), GROUPS]);
    log(`${FAULTED.toLocaleString('en-US')} instances faulted in ${GROUPS} groups`);
    await db.query('VACUUM ANALYZE');
    await db.end();

    // A user of the console, signed in through its form.
    await call('POST', '/identity/users', {
      name: 'operator',
      password: PASSWORD,
      permissions: ['alterations:*', 'workflows/instances:view', 'workflows/definitions:view'],
    });
    const signIn = await fetch(`${base}/console/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
      body: new URLSearchParams({ username: 'operator', password: PASSWORD }),
    });
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;

    const timed = async (url: string, check: (html: string) => boolean) => {
      const times: number[] = [];
      for (let i = 0; i < RUNS + 1; i++) {
        const started = performance.now();
        const res = await fetch(base + url, { headers: { cookie } });
        const html = await res.text();
        const ms = performance.now() - started;
        if (res.status !== 200 || !check(html)) throw new Error(`${url}: HTTP ${res.status} ${html.slice(0, 300)}`);
        if (i > 0) times.push(ms); // the first warms the connection pool and the route
      }
      return summary(times);
    };
    const results: Record<string, unknown> = {
      n: N,
      canary: CANARY,
      faulted: FAULTED,
      groups: GROUPS,
      at: new Date().toISOString(),
    };
    const total = N.toLocaleString('en-US');
    results.planPage = await timed(`/console/plans/${planId}`, (h) => h.includes('Paused') && h.includes(total));
    results.pendingJobs = await timed(`/console/plans/${planId}?jobs=pending`, (h) => h.includes('Pending'));
    results.failedJobs = await timed(`/console/plans/${planId}?jobs=failed`, (h) => h.includes('Failed'));
    results.plansList = await timed('/console/plans', (h) => h.includes(planId));
    const definitionPage = `/console/definitions/${DEFINITION.definitionId}`;
    results.dashboard = await timed('/console/dashboard', (h) => h.includes('Payment gateway timed out, cause'));
    results.definitionDrawing = await timed(definitionPage, (h) => h.includes('waiting, 0 scheduled'));

    // The live stream: from its request to the first progress event (status and counts).
    const streamTimes: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      const controller = new AbortController();
      const res = await fetch(`${base}/console/plans/${planId}/events`, {
        headers: { cookie, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      const reader = res.body!.getReader();
      let text = '';
      while (!text.includes('event: progress')) text += new TextDecoder().decode((await reader.read()).value);
      streamTimes.push(performance.now() - started);
      controller.abort();
    }
    results.firstProgressEvent = summary(streamTimes);

    if (existsSync(CHROMIUM)) {
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--no-sandbox', '--disable-dev-shm-usage'],
      });
      const context = await browser.newContext();
      await context.addCookies([{ name: 'wfa_console', value: cookie.split('=')[1]!, url: `${base}/console` }]);
      const page = await context.newPage();
      // Each page in Chromium, from navigation until what an operator reads there is shown.
      const shown = async (url: string, read: () => Promise<void>) => {
        const times: number[] = [];
        for (let i = 0; i < RUNS + 1; i++) {
          const started = performance.now();
          await page.goto(base + url, { waitUntil: 'domcontentloaded' });
          await read();
          if (i > 0) times.push(performance.now() - started);
        }
        return summary(times);
      };
      results.browserPage = await shown(`/console/plans/${planId}`, () =>
        page.getByRole('status', { name: 'Plan status' }).getByText('Paused').waitFor(),
      );
      results.browserDashboard = await shown('/console/dashboard', async () => {
        await page
          .getByRole('region', { name: 'Unfinished instances per definition' })
          .getByRole('row')
          .nth(1)
          .waitFor();
        await page
          .getByRole('region', { name: 'Largest incident groups' })
          .getByText('Payment gateway timed out, cause', { exact: false })
          .first()
          .waitFor();
      });
      results.browserDefinition = await shown(definitionPage, () =>
        page
          .getByRole('group', { name: /The flowchart of/ })
          .getByRole('img', { name: /^wait \(Event\): \d+ waiting/ })
          .waitFor(),
      );
      await browser.close();
    }

    const line = (name: string, r: unknown) => {
      const s = r as { medianMs: number; maxMs: number } | undefined;
      return s
        ? `  ${name.padEnd(50)} median ${String(s.medianMs).padStart(7)} ms   max ${String(s.maxMs).padStart(7)} ms`
        : '';
    };
    process.stdout.write(
      [
        '',
        `Console, a plan of ${total} jobs (${CANARY.toLocaleString('en-US')} run, Paused), ${RUNS} runs each:`,
        line('plan page, HTML (status, counts, 50 jobs)', results.planPage),
        line('plan page, Pending jobs on their own', results.pendingJobs),
        line('plan page, Failed jobs on their own', results.failedJobs),
        line('event stream, first progress event', results.firstProgressEvent),
        line('Plans list', results.plansList),
        line('plan page in Chromium, status shown', results.browserPage),
        line(`Dashboard, HTML (${GROUPS} incident groups)`, results.dashboard),
        line('Dashboard in Chromium, counts and groups shown', results.browserDashboard),
        line("a definition's drawing, HTML (counts per step)", results.definitionDrawing),
        line("a definition's drawing in Chromium, shown", results.browserDefinition),
        '',
      ]
        .filter((l) => l !== '')
        .join('\n') + '\n',
    );
    await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
    await writeFile(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    for (const stop of stops) await stop().catch((err) => log(`stop failed: ${String(err)}`));
  }
}

await main();
