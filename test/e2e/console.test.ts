import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import pg from 'pg';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote, chain, fault, writeLine } from '../support/workflows.js';

/**
 * The console (contract section 11) as its users see it: the service in a process of its own, a headless
 * Chromium (Debian's `chromium`, driven by playwright-core), users made through the identity API, and
 * everything found by role and accessible name. One service and one browser for the whole file; each test
 * has its own context (its own cookies).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
// CI installs Chromium (.ci/run): there a missing browser is a failure, never a silent skip.
if (!available && process.env.CI) throw new Error(`console.test.ts: no Chromium at ${CHROMIUM} (CHROMIUM_PATH)`);
if (!available)
  console.warn(`console.test.ts skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or CHROMIUM_PATH)`);

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const MARKUP = '<img src=x onerror=alert(1)>';
const UI_URL = 'http://temporal-ui.test:8080';
const run = randomBytes(3).toString('hex');
const definitionId = `console-orders-${run}`;
const PASSWORD = 'console-password-1';

let service: SpawnedService;
let work: string;
let base: string;
let pool: pg.Pool;
let browser: Browser;
let versionId: string;
/** Messages the browser logged about the CSP (a blocked inline script or style): there must be none. */
const cspViolations: string[] = [];
/** Dialogs opened by pages (an `alert` run from stored markup would be one): there must be none. */
const dialogs: string[] = [];

const call = async (method: string, p: string, body?: unknown, key = service.adminKey) => {
  const res = await fetch(base + p, {
    method,
    headers: { authorization: `ApiKey ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
};

async function eventually<T>(check: () => Promise<T | undefined | false>, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`Timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function createUser(name: string, permissions: string[], tenantId?: string) {
  const r = await call('POST', '/identity/users', { name, password: PASSWORD, permissions, tenantId });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

async function submit(body: Record<string, unknown>, key?: string): Promise<string> {
  const r = await call('POST', '/alterations/submit', body, key);
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

const planStatus = async (id: string, key?: string) =>
  (await call('GET', `/alterations/${id}`, undefined, key)).body.plan.status as number;

async function newContext(): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  context.on('page', watch);
  return context;
}

function watch(page: Page) {
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(`${page.url()}: ${m.text()}`);
  });
  page.on('dialog', (d) => {
    dialogs.push(`${page.url()}: ${d.message()}`);
    void d.dismiss();
  });
}

/** A new context signed in as `name` through the sign-in form; its first page is the Dashboard. */
async function signedIn(name: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await newContext();
  const page = await context.newPage();
  await page.goto(`${base}/console`);
  await page.getByLabel('Username').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();
  return { context, page };
}

/** No serious or critical axe-core violation on the page as it is now. */
async function expectAccessible(page: Page, what: string) {
  const results = await new AxeBuilder({ page }).analyze();
  const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(
    bad.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
    what,
  ).toEqual([]);
}

/** At a phone's width the page itself never scrolls sideways (tables scroll inside their own box). */
async function expectNoSidewaysScroll(page: Page, what: string) {
  const before = page.viewportSize()!;
  await page.setViewportSize({ width: 390, height: 844 });
  const [scroll, client] = await page.evaluate<[number, number]>(
    '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
  );
  expect(scroll, `${what} at 390×844: scrollWidth ${scroll} > clientWidth ${client}`).toBeLessThanOrEqual(client);
  await page.setViewportSize(before);
}

const statusOf = (page: Page) => page.getByRole('status', { name: 'Plan status' });

/**
 * With WFA_SCREENSHOT_DIR set, a screenshot of the page as it is now (docs/console.md shows them:
 * `WFA_SCREENSHOT_DIR=docs/images npx vitest run test/e2e/console.test.ts`); without it, nothing.
 */
async function screenshot(page: Page, name: string) {
  const dir = process.env.WFA_SCREENSHOT_DIR;
  if (dir) await page.screenshot({ path: path.join(dir, `console-${name}.png`), fullPage: true });
}

let slowInstances: string[];
let pausedPlan: string;
let completedPlan: string;

beforeAll(async () => {
  if (!available) return;
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-console-'));
  service = await spawnService('console', work, {
    ALTERATION_BATCH_SIZE: '10',
    TEMPORAL_UI_URL: UI_URL,
    // The tests reach the service from loopback: a trusted proxy there may say the client came over https.
    TRUSTED_PROXIES: '127.0.0.1/32',
    EVENT_STREAMS_PER_TENANT: '6',
  });
  base = service.url;
  pool = new pg.Pool({ connectionString: service.databaseUrl, max: 2 });
  const def = await call('POST', '/workflow-definitions', {
    ...approvalWithNote(definitionId),
    name: `Orders ${MARKUP}`,
  });
  expect(def.status, JSON.stringify(def.body)).toBe(201);
  versionId = def.body.id;
  // Three instances the way a client makes them (their names are markup), and seeded ones for slow plans.
  for (const i of [1, 2, 3]) {
    const r = await call('POST', '/workflow-instances', {
      definitionId,
      name: `${MARKUP} #${i}`,
      correlationId: `console-${run}-${i}`,
      variables: { note: `note ${MARKUP}` },
    });
    expect(r.status).toBe(202);
  }
  slowInstances = await seedInstances(pool, {
    definitionVersionId: versionId,
    count: 120,
    variables: { amount: 1 },
    namePrefix: `slow-${run}-`,
  });
  await createUser(`op-${run}`, ['alterations:*', 'workflows/instances:view', 'workflows/definitions:view']);
  await createUser(`viewer-${run}`, ['alterations:view', 'workflows/instances:view']);
  await createUser(`acme-${run}`, ['alterations:*', 'workflows/instances:view'], `acme-${run}`);
  completedPlan = await submit({
    id: `done-${run}`,
    alterations: [{ type: 'ModifyVariable', variableId: MARKUP, value: 1 }],
    filter: { correlationIds: [`console-${run}-1`] },
  });
  pausedPlan = await submit({
    id: `canary-${run}`,
    alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 2 }],
    filter: { workflowInstanceIds: slowInstances.slice(0, 40) },
    rollout: { canary: 10 },
  });
  await eventually(async () => (await planStatus(completedPlan)) === 4, 'the first plan to complete');
  await eventually(async () => (await planStatus(pausedPlan)) === 7, 'the canary plan to pause');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await pool?.end();
  await service?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe.skipIf(!available)('the console, in Chromium', () => {
  it('signs in and out; the session cookie is HttpOnly, SameSite=Strict, Path=/console, and dies with the sign-out', async () => {
    const context = await newContext();
    const page = await context.newPage();
    await page.goto(`${base}/console`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await expectAccessible(page, 'sign-in');
    await expectNoSidewaysScroll(page, 'sign-in');
    await screenshot(page, 'sign-in');
    // A wrong password: the identity endpoints' words, and no session.
    await page.getByLabel('Username').fill(`op-${run}`);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Unknown user name or wrong password').waitFor();
    expect(await context.cookies()).toEqual([]);

    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();
    const cookies = await context.cookies();
    expect(cookies).toHaveLength(1);
    const [cookie] = cookies;
    expect(cookie).toMatchObject({
      name: 'wfa_console',
      httpOnly: true,
      sameSite: 'Strict',
      path: '/console',
      secure: false,
    });
    expect(await page.evaluate<string>('document.cookie')).toBe('');
    for (const name of ['Plans', 'Instances', 'New plan', 'Approvals'])
      await expect(page.getByRole('link', { name, exact: true }).isVisible()).resolves.toBe(true);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You have signed out.').waitFor();
    expect(await context.cookies()).toEqual([]);
    // The cookie of the ended session, presented again, opens nothing: the session is revoked server-side.
    const replay = await fetch(`${base}/console/plans`, {
      headers: { cookie: `wfa_console=${cookie!.value}` },
      redirect: 'manual',
    });
    expect(replay.status).toBe(303);
    expect(replay.headers.get('location')).toBe('/console/sign-in?why=ended');
    await context.close();
  });

  it('marks the session cookie Secure behind a trusted proxy that says https', async () => {
    const host = new URL(base).host;
    const signIn = (headers: Record<string, string>) =>
      fetch(`${base}/console/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({ username: `op-${run}`, password: PASSWORD }),
      });
    const plain = await signIn({ origin: `http://${host}` });
    expect(plain.status).toBe(303);
    expect(plain.headers.get('set-cookie')).toMatch(/^wfa_console=[^;]+; Path=\/console; HttpOnly; SameSite=Strict$/);
    // The answer carries the session's refresh token in its cookie: no cache keeps it.
    expect(plain.headers.get('cache-control')).toBe('no-store');
    const https = await signIn({ origin: `https://${host}`, 'x-forwarded-proto': 'https' });
    expect(https.status).toBe(303);
    expect(https.headers.get('set-cookie')).toMatch(/; Secure/);
    // The proxy's https is the origin the console expects then: the plain one is another origin.
    const mixed = await signIn({ origin: `http://${host}`, 'x-forwarded-proto': 'https' });
    expect(mixed.status).toBe(403);
  });

  it('sends its CSP and frame-ancestors on every answer, serves hashed assets for a year, and uses no inline script or style', async () => {
    const urls = ['/console', '/console/sign-in', '/console/plans', '/console/no-such-page', '/console/plans/x/events'];
    for (const u of urls) {
      const r = await fetch(base + u, { redirect: 'manual' });
      expect(r.headers.get('content-security-policy'), u).toBe(CSP);
      expect(r.headers.get('x-frame-options'), u).toBe('DENY');
      expect(r.headers.get('x-content-type-options'), u).toBe('nosniff');
    }
    const html = await (await fetch(`${base}/console/sign-in`)).text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(html).not.toMatch(/<style/i);
    expect(html).not.toMatch(/\sstyle=/i);
    const assets = [...html.matchAll(/(?:href|src)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toHaveLength(3);
    for (const a of assets) {
      const r = await fetch(base + a);
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(r.headers.get('content-security-policy')).toBe(CSP);
      const bytes = Buffer.from(await r.arrayBuffer());
      const hash = /\.([0-9a-f]{16})\.(css|js)$/.exec(a)![1];
      expect(createHash('sha256').update(bytes).digest('hex').slice(0, 16)).toBe(hash);
    }
    expect((await fetch(`${base}/console/assets/script.0000000000000000.js`)).status).toBe(404);

    // Framed by another page: the browser refuses (frame-ancestors 'none').
    const context = await newContext();
    const page = await context.newPage();
    await page.setContent(`<iframe title="console" src="${base}/console/sign-in"></iframe>`);
    await page.waitForTimeout(1500);
    const frame = page.frames().find((f) => f !== page.mainFrame());
    const framedButtons = frame ? await frame.getByRole('button', { name: 'Sign in' }).count() : 0;
    expect(framedButtons).toBe(0);
    // The browser said why (and that is the one CSP message this file expects: taken off the list).
    const refusal = cspViolations.findIndex((m) => m.includes("frame-ancestors 'none'"));
    expect(refusal).toBeGreaterThanOrEqual(0);
    cspViolations.splice(refusal, 1);
    await context.close();
  });

  it('refuses a form posted from another origin, before it looks at any session', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    // Another site's page posting to the console (its Origin is not the console's): 403, the plan untouched.
    const attacker = await context.newPage();
    await attacker.setContent(
      `<form method="post" action="${base}/console/plans/${pausedPlan}/resume"><button>Win a prize</button></form>`,
    );
    const [answer] = await Promise.all([
      attacker.waitForResponse((r) => r.url().endsWith('/resume')),
      attacker.getByRole('button', { name: 'Win a prize' }).click(),
    ]);
    expect(answer.status()).toBe(403);
    await attacker.getByText('Cross-origin request refused').waitFor();
    // The same with the victim's own cookie attached (a same-site attacker): refused for its Origin.
    const forged = await page.request.post(`${base}/console/plans/${pausedPlan}/resume`, {
      headers: { origin: 'http://evil.example' },
      form: {},
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    expect(await planStatus(pausedPlan)).toBe(7);
    await context.close();
  });

  it('links Back from a problem page only to a console page of its own origin, never to a look-alike host', async () => {
    const host = new URL(base).host;
    const backOf = async (referer: string) => {
      // A query value with NUL: refused by the input rule before any session is looked at.
      const r = await fetch(`${base}/console/plans?x=%00`, { headers: { referer } });
      expect(r.status).toBe(400);
      return /<a href="([^"]*)">Back<\/a>/.exec(await r.text())?.[1];
    };
    expect(await backOf(`${base}/console/plans?status=4`)).toBe('/console/plans?status=4');
    for (const elsewhere of [
      `http://${host}.evil.example/console/plans`,
      `http://${host}@evil.example/console/plans`,
      `http://evil.example/console/plans`,
      `${base}/docs`,
      'not a URL',
    ])
      expect(await backOf(elsewhere), elsewhere).toBeUndefined();
  });

  it('lists plans newest first with live status, filters them by status, and pages them', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.getByRole('link', { name: 'Plans', exact: true }).click();
    const rows = page.getByRole('region', { name: 'Plans, newest first' }).getByRole('row');
    await expectAccessible(page, 'Plans');
    await expectNoSidewaysScroll(page, 'Plans');
    // Newest first: the canary plan was submitted after the completed one.
    const order = await rows.allInnerTexts();
    const at = (id: string) => order.findIndex((t) => t.includes(id));
    expect(at(pausedPlan)).toBeGreaterThanOrEqual(0);
    expect(at(pausedPlan)).toBeLessThan(at(completedPlan));
    const link = page.getByRole('link', { name: completedPlan, exact: true });
    expect(await link.getAttribute('href')).toBe(`/console/plans/${completedPlan}`);
    await expect(rows.filter({ hasText: completedPlan }).innerText()).resolves.toContain('Completed');

    // By status: only the Paused ones.
    await page.getByLabel('Status').selectOption({ label: 'Paused' });
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(/status=7/);
    await expect(rows.filter({ hasText: pausedPlan }).innerText()).resolves.toContain('Paused');
    expect(await page.getByRole('link', { name: completedPlan }).count()).toBe(0);
    await page.getByLabel('Status').selectOption({ label: 'Failed' });
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('No plan is Failed.').waitFor();

    // Live: a plan that starts running shows it in its row, without a reload.
    const live = await submit({
      id: `live-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 3 }],
      filter: { workflowInstanceIds: slowInstances.slice(40, 60) },
      rollout: { canary: 5 },
    });
    await page.goto(`${base}/console/plans`);
    await page.evaluate('window.notReloaded = true');
    const row = rows.filter({ hasText: live });
    await eventually(async () => (await row.innerText()).includes('Paused'), 'the row to show the canary pause');
    expect(await row.innerText()).toContain('5 / 20');
    await call('POST', `/alterations/${live}/resume`);
    await eventually(async () => (await row.innerText()).includes('Completed'), 'the row to show Completed');
    expect(await row.innerText()).toContain('20 / 20');
    expect(await page.evaluate<boolean>('window.notReloaded === true')).toBe(true);
    await screenshot(page, 'plans');

    // Pages of 25: 26 more plans (their filter matches nothing) push the oldest to the next page.
    for (let i = 0; i < 26; i++)
      await submit({ alterations: [{ type: 'Cancel' }], filter: { correlationIds: [`none-${run}-${i}`] } });
    await page.reload();
    expect(await page.getByRole('link', { name: completedPlan, exact: true }).count()).toBe(0);
    await page.getByRole('link', { name: 'Older plans' }).click();
    await page.getByRole('link', { name: completedPlan, exact: true }).waitFor();
    await page.getByRole('link', { name: 'Newest plans' }).waitFor();
    await context.close();
  });

  it('pauses, resumes, re-rates, cancels and reverts a plan from its page, which follows it live', async () => {
    const planId = await submit({
      id: `steer-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
      filter: { workflowInstanceIds: slowInstances.slice(60, 120) },
      rollout: { rate: 2 },
    });
    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/plans/${planId}`);
    expect(page.url()).toContain(planId);
    await page.evaluate('window.notReloaded = true');
    await page.getByText('Live: this page follows the plan as it runs.').waitFor();
    await eventually(async () => (await statusOf(page).innerText()) === 'Running', 'Running', 20_000);
    const progress = page.getByRole('region', { name: 'Progress' });
    await eventually(
      async () => /Completed\s*[1-9]/.test(await progress.innerText()),
      'jobs to complete, shown live',
      20_000,
    );
    await expectAccessible(page, 'a running plan');
    await expectNoSidewaysScroll(page, 'a running plan');
    const link = page.getByRole('link', { name: `Workflow alteration-plan-${planId} in the Temporal UI` });
    expect(await link.getAttribute('href')).toBe(`${UI_URL}/namespaces/default/workflows/alteration-plan-${planId}`);

    await page.getByRole('button', { name: 'Pause' }).click();
    await eventually(async () => (await statusOf(page).innerText()) === 'Paused', 'Paused');
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    expect(await page.getByRole('button', { name: 'Pause' }).isVisible()).toBe(false);
    expect(await planStatus(planId)).toBe(7);

    await page.getByRole('button', { name: 'Resume' }).click();
    await eventually(async () => (await statusOf(page).innerText()) === 'Running', 'Running again');
    await page.getByLabel('Rate (instances per second)').fill('1');
    await page.getByRole('button', { name: 'Change rollout' }).click();
    await page.getByText('at most 1 instances per second').waitFor();
    expect((await call('GET', `/alterations/${planId}`)).body.plan.rollout.rate).toBe(1);

    await page.getByRole('button', { name: 'Cancel plan' }).click();
    await eventually(async () => (await statusOf(page).innerText()) === 'Cancelled', 'Cancelled');
    expect(await planStatus(planId)).toBe(6);
    // Finished: Revert appears where Pause was, without a reload.
    await page.getByRole('button', { name: 'Revert' }).waitFor();
    expect(await page.evaluate<boolean>('window.notReloaded === true')).toBe(true);
    await page.getByRole('button', { name: 'Revert' }).click();
    await page.waitForURL((u) => !u.pathname.endsWith(`/${planId}`));
    await page.getByRole('link', { name: planId, exact: true }).waitFor();
    const revertId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    expect((await call('GET', `/alterations/${revertId}`)).body.plan.revertOf).toBe(planId);
    await eventually(async () => (await statusOf(page).innerText()) === 'Completed', 'the revert to complete, live');
    // Its jobs, paged, each with its log; and the original now says who reverted it.
    await page.getByRole('link', { name: /^All jobs/ }).waitFor();
    await page.goto(`${base}/console/plans/${planId}`);
    await page.getByRole('link', { name: revertId, exact: true }).waitFor();
    expect(await page.getByRole('button', { name: 'Revert' }).count()).toBe(0);
    await context.close();
  });

  it('shows the failed jobs on their own with their logs, and markup in logs and ids as text', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/plans/${completedPlan}`);
    await page.getByRole('link', { name: /^Failed \(1\)/ }).click();
    const jobs = page.getByRole('region', { name: 'Failed jobs of the plan' });
    await jobs.getByText('1 entry').click();
    await jobs.getByText(`Variable with ID ${MARKUP} not found`).waitFor();
    await expectAccessible(page, 'a completed plan, its failed jobs');
    await expectNoSidewaysScroll(page, 'a completed plan');
    // An id that is markup, in the address: the answer names it as text.
    await page.goto(`${base}/console/plans/${encodeURIComponent(MARKUP)}`);
    await page.getByText(`Plan ${MARKUP} not found`).waitFor();
    expect(await page.locator('img').count()).toBe(0);
    await expectAccessible(page, 'a problem page');
    await context.close();
  });

  it('makes a plan by form: dry run, preview, then submit', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.getByRole('link', { name: 'New plan' }).click();
    await page.getByLabel('Correlation ids').fill(`console-${run}-2\nconsole-${run}-3`);
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('2 instances match.').waitFor();
    await page.getByRole('button', { name: 'Add ModifyVariable' }).click();
    await page.getByLabel('Variable id').fill('note');
    await page.getByLabel('New value').fill(`changed ${MARKUP}`);
    await page.getByRole('button', { name: 'Preview' }).click();
    const preview = page.getByRole('region', { name: 'Preview' });
    await preview.getByText('2 instances match.').waitFor();
    await preview
      .getByRole('cell', { name: `"changed ${MARKUP}"` })
      .first()
      .waitFor();
    await preview
      .getByRole('cell', { name: `"note ${MARKUP}"` })
      .first()
      .waitFor();
    const json = JSON.parse(await page.getByLabel('Plan JSON').inputValue());
    expect(json).toEqual({
      alterations: [{ type: 'ModifyVariable', variableId: 'note', value: `changed ${MARKUP}` }],
      filter: { correlationIds: [`console-${run}-2`, `console-${run}-3`] },
    });
    // The preview sums up what it would do, and offers Submit plan again below itself.
    await preview.getByText('Of the first 2: 2 would succeed, 0 would fail').waitFor();
    expect(await preview.getByRole('button', { name: 'Submit plan' }).count()).toBe(1);
    await expectAccessible(page, 'New plan with a preview');
    await screenshot(page, 'new-plan');
    await expectNoSidewaysScroll(page, 'New plan with a preview');
    await page.getByLabel('Plan id (optional)').fill(`form-${run}`);
    await page.getByRole('button', { name: 'Submit plan' }).first().click();
    await page.waitForURL(`${base}/console/plans/form-${run}?notice=submitted`);
    await eventually(async () => (await statusOf(page).innerText()) === 'Completed', 'the plan to complete');
    const done = await call('GET', `/alterations/form-${run}`);
    expect(done.body.plan.jobCounts).toMatchObject({ total: 2, completed: 2 });
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('makes a plan from Plan JSON, shows problems next to it, and fills the form from it', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/new-plan`);
    const json = page.getByLabel('Plan JSON');
    await json.fill('{ "alterations": [ }');
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page
      .getByText(/Plan JSON is not JSON/)
      .first()
      .waitFor();
    expect(await json.inputValue()).toBe('{ "alterations": [ }');
    await json.fill(
      JSON.stringify({ alterations: [{ type: 'Cancel' }], filter: { definitionIds: [definitionId] }, tenantId: 'x' }),
    );
    await page.getByRole('button', { name: 'Submit plan' }).click();
    await page.getByText('Unknown property "tenantId"').first().waitFor();
    const body = {
      alterations: [{ type: 'ModifyVariable', variableId: 'note', value: 'from JSON' }],
      filter: { correlationIds: [`console-${run}-3`], statuses: ['Running'] },
      rollout: { rate: 100 },
    };
    await json.fill(JSON.stringify(body));
    // A Plan id typed into its field counts, Plan JSON naming none.
    await page.getByLabel('Plan id (optional)').fill(`json-${run}`);
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('1 instance match.').waitFor();
    expect(await page.getByLabel('Plan id (optional)').inputValue()).toBe(`json-${run}`);
    // The form took the body's values.
    expect(await page.getByLabel('Correlation ids').inputValue()).toBe(`console-${run}-3`);
    expect(await page.getByLabel('Running').isChecked()).toBe(true);
    expect(await page.getByLabel('Variable id').inputValue()).toBe('note');
    expect(await page.getByLabel('Rate (instances per second)').inputValue()).toBe('100');
    await page.getByRole('button', { name: 'Preview' }).click();
    await page.getByRole('region', { name: 'Preview' }).getByRole('cell', { name: '"from JSON"' }).waitFor();
    await page.getByRole('button', { name: 'Submit plan' }).first().click();
    await page.waitForURL(`${base}/console/plans/json-${run}?notice=submitted`);
    expect((await call('GET', `/alterations/json-${run}`)).body.plan.rollout.rate).toBe(100);
    await context.close();
  });

  it('brings Plan JSON up to date once per field changed, not per keystroke: one audit entry', async () => {
    const name = `typist-${run}`;
    await createUser(name, ['alterations:*']);
    const { context, page } = await signedIn(name);
    await page.goto(`${base}/console/new-plan`);
    await page.getByLabel('Search term').pressSequentially('order', { delay: 400 });
    await page.getByLabel('Correlation ids').click();
    await eventually(
      async () => JSON.parse(await page.getByLabel('Plan JSON').inputValue()).filter?.searchTerm === 'order',
      'Plan JSON to follow the search term',
    );
    const drafts = await call('GET', `/audit?actor=${name}&action=plan.draft`);
    expect(drafts.body.items).toHaveLength(1);
    await context.close();
  });

  it('never submits typed Plan JSON narrower than typed: a typo is named at Plan JSON, and pressed again, refused again', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/new-plan`);
    const json = page.getByLabel('Plan JSON');
    const typo = {
      id: `typo-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'note', value: 'typo' }],
      // "correlationId" for "correlationIds": the user meant one instance; without it the plan is wider.
      filter: { definitionIds: [definitionId], correlationId: [`console-${run}-3`] },
      rollout: { rate: 100, canaryy: 1 },
    };
    await json.fill(JSON.stringify(typo));
    for (const press of [1, 2]) {
      await page.getByRole('button', { name: 'Submit plan' }).first().click();
      // Said at Plan JSON (the field it describes), with each unknown key's path.
      await page.getByText('/filter/correlationId: Unknown property "correlationId"').waitFor();
      await page.getByText('/rollout/canaryy: Unknown property "canaryy"').waitFor();
      expect(await json.getAttribute('aria-invalid'), `press ${press}`).toBe('true');
      expect(await json.getAttribute('aria-describedby'), `press ${press}`).toContain('plan-json-error');
      expect(JSON.parse(await json.inputValue()), `press ${press}`).toEqual(typo);
      expect(page.url(), `press ${press}`).toBe(`${base}/console/new-plan`);
    }
    // Add rebuilds Plan JSON from the form, which would drop the typo: refused, Plan JSON kept, the typo named.
    await page.getByRole('button', { name: 'Add Cancel', exact: true }).click();
    await page.getByText('/filter/correlationId: Unknown property "correlationId"').waitFor();
    expect(JSON.parse(await json.inputValue())).toEqual(typo);
    // A form field typed into does not replace Plan JSON either (the page's script keeps it in charge).
    await page.getByLabel('Variable id').fill('other');
    await page.waitForTimeout(800);
    expect(JSON.parse(await json.inputValue())).toEqual(typo);
    await page.getByRole('button', { name: 'Submit plan' }).click();
    await page.getByText('/rollout/canaryy: Unknown property "canaryy"').waitFor();
    expect(page.url()).toBe(`${base}/console/new-plan`);
    expect((await call('GET', `/alterations/typo-${run}`)).status).toBe(404);
    await context.close();
  });

  it('filters by its activity and timestamp rows, each row a group of its own that the Plan JSON follows', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/new-plan`);
    await page.getByLabel('Correlation ids').fill(`console-${run}-2\nconsole-${run}-3`);
    await page.getByText('More filters').click();
    const stamp = page.getByRole('group', { name: 'Timestamp filter 1' });
    await stamp.getByLabel('Timestamp').selectOption('CreatedAt');
    await stamp.getByLabel('Comparison').selectOption('LessThan');
    await stamp.getByLabel('Date and time').fill('2000-01-01T00:00:00Z');
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('0 instances match.').waitFor();
    // The row kept its values, a second empty row follows it, and the Plan JSON says the same.
    const kept = page.getByRole('group', { name: 'Timestamp filter 1' });
    expect(await kept.getByLabel('Comparison').inputValue()).toBe('LessThan');
    expect(await page.getByRole('group', { name: 'Timestamp filter 2' }).getByLabel('Date and time').inputValue()).toBe(
      '',
    );
    expect(JSON.parse(await page.getByLabel('Plan JSON').inputValue()).filter.timestampFilters).toEqual([
      { column: 'CreatedAt', operator: 'LessThan', timestamp: '2000-01-01T00:00:00Z' },
    ]);
    await kept.getByLabel('Comparison').selectOption('GreaterThan');
    // The other fields under More filters: names, and the two three-way choices.
    await page.getByLabel('Instance names').fill(`${MARKUP} #2\n${MARKUP} #3`);
    await page.getByLabel('Incidents').selectOption({ label: 'Without incidents' });
    await page.getByLabel('System instances').selectOption({ label: 'No system instances' });
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('2 instances match.').waitFor();
    expect(JSON.parse(await page.getByLabel('Plan JSON').inputValue()).filter).toMatchObject({
      names: [`${MARKUP} #2`, `${MARKUP} #3`],
      hasIncidents: false,
      isSystem: false,
    });
    await page.getByLabel('Incidents').selectOption({ label: 'With incidents' });
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('0 instances match.').waitFor();
    await page.getByLabel('Incidents').selectOption({ label: 'Any' });
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('2 instances match.').waitFor();
    // An activity row: no instance has a record of this activity.
    await page
      .getByRole('group', { name: 'Activity filter 1' })
      .getByLabel('Activity id')
      .fill(`no-such-activity-${run}`);
    await page.getByRole('button', { name: 'Dry run' }).click();
    await page.getByText('0 instances match.').waitFor();
    const filter = JSON.parse(await page.getByLabel('Plan JSON').inputValue()).filter;
    expect(filter.activityFilters).toEqual([{ activityId: `no-such-activity-${run}` }]);
    expect(filter.timestampFilters).toEqual([
      { column: 'CreatedAt', operator: 'GreaterThan', timestamp: '2000-01-01T00:00:00Z' },
    ]);
    expect(
      await page.getByRole('group', { name: 'Activity filter 2' }).getByLabel('Activity status').inputValue(),
    ).toBe('');
    await expectAccessible(page, 'New plan with activity and timestamp rows');
    await context.close();
  });

  it('walks New plan by keyboard alone (Tab, Enter, Space) to a submitted plan', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    /** Presses Tab until the focused element's accessible name is `name`. */
    const tabTo = async (name: string) => {
      for (let i = 0; i < 200; i++) {
        await page.keyboard.press('Tab');
        // The focused element's name as a user hears it: its label, else its aria-label, else its text.
        const focused = await page.evaluate<string>(`(() => {
          const el = document.activeElement;
          return ((el.labels && el.labels[0] && el.labels[0].textContent) || el.getAttribute('aria-label') || el.textContent || '').trim();
        })()`);
        if (focused === name) return;
      }
      throw new Error(`Tab never reached "${name}"`);
    };
    await tabTo('New plan');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'New plan' }).waitFor();
    await tabTo('Correlation ids');
    await page.keyboard.type(`console-${run}-1`);
    await tabTo('Dry run');
    await page.keyboard.press('Space');
    await page.getByText('1 instance match.').waitFor();
    await tabTo('Add CancelActivity');
    await page.keyboard.press('Enter');
    await page.getByRole('group', { name: '1. CancelActivity' }).waitFor();
    // The new row's field has the focus.
    await page.keyboard.type('wait');
    await tabTo('Plan id (optional)');
    await page.keyboard.type(`kbd-${run}`);
    await tabTo('Submit plan');
    await page.keyboard.press('Space');
    await page.waitForURL(`${base}/console/plans/kbd-${run}?notice=submitted`);
    const plan = (await call('GET', `/alterations/kbd-${run}`)).body.plan;
    expect(plan.alterations).toEqual([{ type: 'CancelActivity', activityId: 'wait' }]);
    await context.close();
  });

  it('filters and pages Instances, shows markup as text, and "Alter these" opens New plan with that filter', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.getByRole('link', { name: 'Instances' }).click();
    await page.getByLabel('Definition').selectOption({ label: `Orders ${MARKUP} (${definitionId})` });
    await page.getByLabel('Search term').fill(MARKUP);
    await page.getByRole('button', { name: 'Show' }).click();
    const table = page.getByRole('region', { name: 'Instances, newest first' });
    for (const i of [1, 2, 3]) await table.getByRole('link', { name: `${MARKUP} #${i}` }).waitFor();
    expect(await table.getByRole('row').count()).toBe(4);
    await table.getByText(`Orders ${MARKUP}`).first().waitFor();
    expect(await page.locator('img').count()).toBe(0);
    await expectAccessible(page, 'Instances');
    await expectNoSidewaysScroll(page, 'Instances');
    await screenshot(page, 'instances');

    // Paged: 50 a page, the seeded instances fill more than two.
    await page.goto(`${base}/console/instances?definitionId=${definitionId}`);
    await page.getByRole('link', { name: 'Older instances' }).click();
    await page.getByRole('link', { name: 'Newest instances' }).waitFor();

    // One instance: its variables (markup as text).
    await page.goto(`${base}/console/instances?searchTerm=${encodeURIComponent(`${MARKUP} #2`)}`);
    await page.getByRole('link', { name: `${MARKUP} #2` }).click();
    await page.getByRole('heading', { name: `${MARKUP} #2` }).waitFor();
    await page.getByRole('cell', { name: /changed <img src=x onerror=alert\(1\)>|note <img/ }).waitFor();
    expect(await page.locator('img').count()).toBe(0);
    await expectAccessible(page, 'an instance');
    await expectNoSidewaysScroll(page, 'an instance');
    await screenshot(page, 'instance');

    // Alter these: the list's filter becomes the plan's.
    await page.goto(`${base}/console/instances?definitionId=${definitionId}&subStatus=Suspended`);
    await page.getByRole('link', { name: 'Alter these' }).click();
    await page.getByRole('heading', { name: 'New plan' }).waitFor();
    expect(await page.getByLabel('Definition ids').inputValue()).toBe(definitionId);
    expect(await page.getByLabel('Suspended').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Dry run' }).click();
    const suspended = await call('POST', '/alterations/dry-run?countOnly=true', {
      definitionIds: [definitionId],
      subStatuses: ['Suspended'],
    });
    await page.getByText(`${suspended.body.count} instances match.`).waitFor();
    await expectAccessible(page, 'New plan from Instances, with a dry run');
    await context.close();
  });

  it('lists what awaits approval (nothing yet), accessibly', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    await page.getByRole('link', { name: 'Approvals' }).click();
    await page.getByText('Nothing is awaiting approval.').waitFor();
    await expectAccessible(page, 'Approvals');
    await expectNoSidewaysScroll(page, 'Approvals');
    await context.close();
  });

  it('asks for approval from New plan; four eyes refuse the submitter; a second user approves it from Approvals with a comment, and it runs', async () => {
    const approver = `approver-${run}`;
    await createUser(approver, ['alterations:view', 'alterations:approve', 'workflows/instances:view']);
    const planId = `gov-${run}`;
    // The submitter: New plan with "Ask for approval by someone else".
    const { context, page } = await signedIn(`op-${run}`);
    await page.getByRole('link', { name: 'New plan' }).click();
    await page.getByText("This tenant's policy asks for no approval.").waitFor();
    await page.getByLabel('Correlation ids').fill(`console-${run}-2`);
    await page.getByRole('button', { name: 'Add ModifyVariable' }).click();
    await page.getByLabel('Variable id').fill('note');
    await page.getByLabel('New value').fill('approved value');
    await page.getByLabel('Ask for approval by someone else').check();
    await page.getByLabel('Plan id (optional)').fill(planId);
    // Plan JSON follows the form (the script asks the server for what the form builds).
    await eventually(
      async () => (await page.getByLabel('Plan JSON').inputValue()).includes('"approval"'),
      'Plan JSON to carry the approval',
    );
    await page.getByRole('button', { name: 'Submit plan' }).click();
    await page.waitForURL(`${base}/console/plans/${planId}?notice=submitted`);
    await page.getByText('Submitted: the plan awaits approval by someone else (Approvals)').waitFor();
    await eventually(async () => (await statusOf(page).innerText()) === 'Awaiting approval', 'Awaiting approval');
    const approval = page.getByRole('region', { name: 'Approval' });
    await approval.getByText('Pending', { exact: true }).waitFor();
    await approval.getByText(`op-${run} (user)`).waitFor();
    await approval.getByRole('cell', { name: '"approved value"' }).first().waitFor();
    await approval.getByText('A plan cannot be approved by the principal that submitted it: another user').waitFor();
    await expectAccessible(page, 'a plan awaiting approval');
    await screenshot(page, 'plan-awaiting-approval');
    await expectNoSidewaysScroll(page, 'a plan awaiting approval');
    // Nothing runs meanwhile; Pause and Resume do not apply, Cancel plan (withdraw) does.
    expect(await page.getByRole('button', { name: 'Pause' }).isVisible()).toBe(false);
    expect(await page.getByRole('button', { name: 'Cancel plan' }).isVisible()).toBe(true);
    // Four eyes: the submitter's own Approve is refused, in the API's words, and nothing changes.
    await page.getByRole('button', { name: 'Approve' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: 'A plan cannot be approved by the principal that submitted it' })
      .waitFor();
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.getByRole('alert').filter({ hasText: 'Forbidden (403)' }).waitFor();
    const stored = (await call('GET', `/alterations/${planId}`)).body.plan;
    expect(stored.status).toBe(8);
    expect(stored.approval).toMatchObject({ state: 'Pending', requestedBy: { kind: 'user', name: `op-${run}` } });
    // Its jobs are made (the set approved is the set that runs), and none has run.
    expect(stored.jobCounts).toMatchObject({ total: 1, pending: 1, completed: 0 });

    // The second user: Approvals lists it with its preview, and approves it with a comment.
    const second = await signedIn(approver);
    await second.page.getByRole('link', { name: 'Approvals' }).click();
    const entry = second.page.getByRole('article', { name: planId });
    await entry.getByRole('link', { name: planId, exact: true }).waitFor();
    await entry.getByText(`op-${run} (user)`).waitFor();
    await entry.getByRole('cell', { name: '"approved value"' }).first().waitFor();
    expect(
      await entry.getByText('A plan cannot be approved by the principal that submitted it: another user').count(),
    ).toBe(0);
    await expectAccessible(second.page, 'Approvals with a plan');
    await screenshot(second.page, 'approvals');
    await expectNoSidewaysScroll(second.page, 'Approvals with a plan');
    await entry.getByLabel('Comment').fill(`Checked the preview ${MARKUP}`);
    await entry.getByRole('button', { name: 'Approve' }).click();
    await second.page.waitForURL(/\/console\/approvals\?notice=approved/);
    await second.page.getByText(`Plan ${planId}: Approved`).waitFor();
    expect(await second.page.getByRole('article', { name: planId }).count()).toBe(0);

    // The submitter's page follows it live: approved, then run to its end.
    await eventually(async () => (await statusOf(page).innerText()) === 'Completed', 'the approved plan to complete');
    await approval.getByText('Approved', { exact: true }).waitFor();
    const decided = (await call('GET', `/alterations/${planId}`)).body.plan;
    expect(decided.approval).toMatchObject({
      state: 'Approved',
      decidedBy: { kind: 'user', name: approver },
      comment: `Checked the preview ${MARKUP}`,
    });
    expect(decided.jobCounts).toMatchObject({ total: 1, completed: 1 });
    // The decision with who, when and why, on the plan's page; the comment as text.
    await second.page.goto(`${base}/console/plans/${planId}`);
    const shown = second.page.getByRole('region', { name: 'Approval' });
    await shown.getByText(`${approver} (user)`).waitFor();
    await shown.getByText(`Checked the preview ${MARKUP}`).waitFor();
    expect(await second.page.locator('img').count()).toBe(0);
    await second.context.close();
    await context.close();
  });

  it('rejects from a plan page with a comment, lets the submitter withdraw, and shows a user without alterations:approve no decision', async () => {
    const approver = `approver-${run}`;
    const body = (id: string) => ({
      id,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 9 }],
      filter: { correlationIds: [`console-${run}-3`] },
      approval: { required: true },
    });
    const rejected = await submit(body(`reject-${run}`));
    const withdrawn = await submit(body(`withdraw-${run}`));
    // A viewer sees them waiting, and why they may not decide.
    const viewer = await signedIn(`viewer-${run}`);
    await viewer.page.getByRole('link', { name: 'Approvals' }).click();
    const entry = viewer.page.getByRole('article', { name: rejected });
    await entry
      .getByText('You may not approve or reject plans: that requires the permission "alterations:approve".')
      .waitFor();
    expect(await viewer.page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    const refused = await viewer.page.request.post(`${base}/console/plans/${rejected}/approve`, {
      headers: { origin: base },
      form: { comment: 'me too' },
      maxRedirects: 0,
    });
    expect(refused.status()).toBe(403);
    expect(await refused.text()).toContain(
      'Missing permission: this operation requires &quot;alterations:approve&quot;',
    );
    await viewer.context.close();

    // The approver rejects one from its page, with a comment.
    let { context, page } = await signedIn(approver);
    await page.goto(`${base}/console/plans/${rejected}`);
    await eventually(async () => (await statusOf(page).innerText()) === 'Awaiting approval', 'Awaiting approval');
    await page.getByLabel('Comment').fill('Not in this quarter');
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.waitForURL(/notice=rejected/);
    await page.getByText('Rejected: the plan is cancelled and no job ran.').waitFor();
    expect(await statusOf(page).innerText()).toBe('Cancelled');
    const approval = page.getByRole('region', { name: 'Approval' });
    await approval.getByText('Rejected', { exact: true }).waitFor();
    await approval.getByText('Not in this quarter').waitFor();
    expect(await page.getByRole('button', { name: 'Approve' }).isVisible()).toBe(false);
    const plan = (await call('GET', `/alterations/${rejected}`)).body.plan;
    expect(plan).toMatchObject({ status: 6, approval: { state: 'Rejected', comment: 'Not in this quarter' } });
    expect(plan.jobCounts).toMatchObject({ total: 1, cancelled: 1, completed: 0, failed: 0 });

    await context.close();

    // Cancel plan (alterations:execute) on a plan awaiting approval withdraws it.
    const operator = await signedIn(`op-${run}`);
    page = operator.page;
    context = operator.context;
    await page.goto(`${base}/console/plans/${withdrawn}`);
    await page.getByRole('button', { name: 'Cancel plan' }).click();
    await page.getByText('Withdrawn: the plan awaited approval').waitFor();
    await eventually(async () => (await statusOf(page).innerText()) === 'Cancelled', 'Cancelled');
    await page.getByRole('region', { name: 'Approval' }).getByText('Withdrawn', { exact: true }).waitFor();
    // Withdrawn by someone else than its submitter (the admin key): the record says who.
    expect((await call('GET', `/alterations/${withdrawn}`)).body.plan.approval).toMatchObject({
      state: 'Withdrawn',
      decidedBy: { kind: 'user', name: `op-${run}` },
    });
    await page.getByRole('link', { name: 'Approvals' }).click();
    await page.getByText('Nothing is awaiting approval.').waitFor();
    await context.close();
  });

  it('offers Revert again once a held revert is rejected, and names the revert that counts as "Reverted by"', async () => {
    const ids = await seedInstances(pool, {
      definitionVersionId: versionId,
      count: 3,
      variables: { amount: 1 },
      namePrefix: `reverted-${run}-`,
    });
    const planId = await submit({
      id: `reverted-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 4 }],
      filter: { workflowInstanceIds: ids },
    });
    await eventually(async () => (await planStatus(planId)) === 4, 'the plan to complete');
    const checker = `revert-checker-${run}`;
    await createUser(checker, ['alterations:*', 'workflows/instances:view', 'workflows/definitions:view']);
    // Every plan held for approval from now on, reverts included; put back however the test ends.
    const policy = (approval: string) =>
      call('PUT', '/alterations/policy', { approval, approvalThreshold: null, approvalTtlSeconds: 604_800 });
    const always = await policy('always');
    expect(always.status, JSON.stringify(always.body)).toBe(200);
    onTestFinished(async () => void (await policy('never')));
    const held = await call('POST', `/alterations/${planId}/revert`, {});
    expect(held.status, JSON.stringify(held.body)).toBe(202);
    const rejected = held.body.planId as string;

    const { context, page } = await signedIn(checker);
    // While the revert is held, it is the plan's revert: named on the plan's page, no second Revert offered.
    await page.goto(`${base}/console/plans/${planId}`);
    await page.getByRole('link', { name: rejected, exact: true }).waitFor();
    expect(await page.getByRole('button', { name: 'Revert' }).count()).toBe(0);
    // Rejected (by someone else than its reverter, the admin key), it never ran and no longer counts.
    await page.goto(`${base}/console/plans/${rejected}`);
    await eventually(async () => (await statusOf(page).innerText()) === 'Awaiting approval', 'Awaiting approval');
    await page.getByLabel('Comment').fill('Not this one');
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.waitForURL(/notice=rejected/);
    await page.goto(`${base}/console/plans/${planId}`);
    await page.getByRole('button', { name: 'Revert' }).waitFor();
    expect(await page.getByRole('link', { name: rejected, exact: true }).count()).toBe(0);
    expect(await page.getByText('Reverted by').count()).toBe(0);
    // Reverted again from its page: a new revert, held in turn, which the plan now names.
    await page.getByRole('button', { name: 'Revert' }).click();
    await page.waitForURL((u) => !u.pathname.endsWith(`/${planId}`));
    const second = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    expect(second).not.toBe(rejected);
    expect((await call('GET', `/alterations/${second}`)).body.plan).toMatchObject({
      revertOf: planId,
      approval: { state: 'Pending' },
    });
    await page.goto(`${base}/console/plans/${planId}`);
    await page.getByRole('link', { name: second, exact: true }).waitFor();
    expect(await page.getByRole('link', { name: rejected, exact: true }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Revert' }).count()).toBe(0);
    await expectAccessible(page, 'a plan whose revert awaits approval');
    // Withdrawn, so that nothing is left awaiting approval.
    expect((await call('POST', `/alterations/${second}/cancel`, {})).status).toBe(202);
    await context.close();
  });

  it('schedules a plan from New plan: Paused by its schedule with when it resumes; Resume outside the windows is refused, ignoring the schedule runs it', async () => {
    const tomorrow = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][(new Date().getUTCDay() + 1) % 7]!;
    const planId = `window-${run}`;
    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/new-plan`);
    await page.getByLabel('Correlation ids').fill(`console-${run}-3`);
    await page.getByRole('button', { name: 'Add ModifyVariable' }).click();
    await page.getByLabel('Variable id').fill('amount');
    await page.getByLabel('New value').fill('7');
    await page.getByText('Maintenance windows', { exact: true }).click();
    const window1 = page.getByRole('group', { name: 'Maintenance window 1' });
    await window1.getByLabel(tomorrow, { exact: true }).check();
    await window1.getByLabel('From', { exact: true }).fill('00:00');
    await window1.getByLabel('To', { exact: true }).fill('00:01');
    await expect(window1.getByLabel('Time zone').inputValue()).resolves.toBe('UTC');
    await page.getByLabel('Plan id (optional)').fill(planId);
    await page.getByRole('button', { name: 'Submit plan' }).click();
    await page.waitForURL(`${base}/console/plans/${planId}?notice=submitted`);
    await eventually(async () => (await statusOf(page).innerText()) === 'Paused', 'Paused by its schedule');
    const progress = page.getByRole('region', { name: 'Progress' });
    await eventually(async () => (await progress.innerText()).includes('schedule'), 'the pause reason schedule');
    const stored = (await call('GET', `/alterations/${planId}`)).body.plan;
    expect(stored.schedule).toEqual({ windows: [{ days: [tomorrow], from: '00:00', to: '00:01', timeZone: 'UTC' }] });
    expect(stored.pauseReason).toBe('schedule');
    const resumesAt = stored.resumesAt as string;
    await eventually(
      async () => (await progress.innerText()).includes(`${resumesAt.slice(0, 10)} ${resumesAt.slice(11, 19)} UTC`),
      'when it resumes, live',
    );
    await page.getByRole('region', { name: 'About this plan' }).getByText(`${tomorrow} 00:00–00:01 UTC`).waitFor();
    await expectAccessible(page, 'a plan paused by its schedule');
    // Paused by its schedule, it can still be paused by hand (to hold across windows): Pause is there.
    expect(await page.getByRole('button', { name: 'Pause' }).isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Resume' }).click();
    const refused = page.getByRole('alert').filter({ hasText: 'is outside its maintenance windows' });
    await refused.waitFor();
    // Its advice in the checkbox's words (and its field's name), never the API's request syntax.
    expect(await refused.innerText()).toContain('Resume it ignoring the schedule (ignoreSchedule) to run it now');
    expect(await refused.innerText()).not.toContain('{');
    expect(await planStatus(planId)).toBe(7);
    await page.getByLabel('Resume ignoring the schedule').check();
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByText('Resumed now, its schedule dropped').waitFor();
    await eventually(async () => (await statusOf(page).innerText()) === 'Completed', 'the plan to run to its end');
    expect((await call('GET', `/alterations/${planId}`)).body.plan.schedule).toBeNull();
    await context.close();
  });

  it("drafts a Migrate's activity mappings from the migration draft, to edit, and the migration follows them", async () => {
    const migId = `console-mig-${run}`;
    const v1 = {
      definitionId: migId,
      root: {
        type: 'Elsa.Flowchart',
        id: 'flow1',
        start: 'start',
        activities: [
          {
            id: 'start',
            type: 'Elsa.WriteLine',
            version: 1,
            text: { typeName: 'String', expression: { type: 'Literal', value: 'started' } },
          },
          {
            id: 'wait',
            name: 'Wait for approval',
            type: 'Elsa.Event',
            version: 1,
            eventName: { typeName: 'String', expression: { type: 'Literal', value: 'approve' } },
          },
        ],
        connections: [{ source: { activity: 'start', port: 'Done' }, target: { activity: 'wait', port: 'In' } }],
      },
    };
    const v2 = structuredClone(v1);
    v2.root.activities[1]!.id = 'await-approval';
    v2.root.connections[0]!.target.activity = 'await-approval';
    expect((await call('POST', '/workflow-definitions', v1)).status).toBe(201);
    const started = await call('POST', '/workflow-instances', { definitionId: migId });
    expect(started.status).toBe(202);
    const instanceId = started.body.workflowInstanceId as string;
    await eventually(
      async () => (await call('GET', `/workflow-instances/${instanceId}`)).body.bookmarks?.length === 1,
      'the instance to wait',
    );
    const published = await call('POST', '/workflow-definitions', v2);
    expect(published.status, JSON.stringify(published.body)).toBe(201);

    const { context, page } = await signedIn(`op-${run}`);
    await page.goto(`${base}/console/new-plan`);
    await page.getByLabel('Definition ids').fill(migId);
    await page.getByRole('button', { name: 'Add Migrate' }).click();
    await page.getByLabel('Target version').fill('2');
    await page.getByLabel('Draft from version').fill('1');
    await page.getByRole('button', { name: 'Draft mappings for alteration 1' }).click();
    const mappings = page.getByLabel('Activity mappings');
    await expect(mappings.inputValue()).resolves.toBe('start -> start\nwait -> await-approval');
    await page.getByText('2 activities mapped (1 by the same id, 1 by the same type and name)').waitFor();
    const json = JSON.parse(await page.getByLabel('Plan JSON').inputValue());
    expect(json.alterations).toEqual([
      {
        type: 'Migrate',
        targetVersion: 2,
        activityMappings: [
          { source: 'start', target: 'start' },
          { source: 'wait', target: 'await-approval' },
        ],
      },
    ]);
    await expectAccessible(page, 'New plan with a drafted Migrate');
    // Edited by hand: the identity mapping is not needed (an activity not named keeps its id).
    await mappings.fill('wait -> await-approval');
    await page.getByRole('button', { name: 'Preview' }).click();
    await page.getByRole('region', { name: 'Preview' }).getByText('would succeed', { exact: true }).waitFor();
    await page.getByLabel('Plan id (optional)').fill(`migrate-${run}`);
    await page.getByRole('button', { name: 'Submit plan' }).first().click();
    await page.waitForURL(`${base}/console/plans/migrate-${run}?notice=submitted`);
    await eventually(async () => (await statusOf(page).innerText()) === 'Completed', 'the migration to complete');
    const plan = (await call('GET', `/alterations/migrate-${run}`)).body.plan;
    expect(plan.alterations[0].activityMappings).toEqual([{ source: 'wait', target: 'await-approval' }]);
    expect(plan.jobCounts).toMatchObject({ total: 1, completed: 1, failed: 0 });
    const moved = (await call('GET', `/workflow-instances/${instanceId}`)).body;
    expect(moved.version).toBe(2);
    expect(moved.bookmarks.map((b: { activityId: string }) => b.activityId)).toEqual(['await-approval']);
    await context.close();
  });

  it('shows a user without alterations:execute no Pause button, and refuses their direct post with the API words', async () => {
    const { context, page } = await signedIn(`viewer-${run}`);
    await page.goto(`${base}/console/plans/${pausedPlan}`);
    await page.getByText('You may not pause, resume, cancel, revert or re-rate plans').waitFor();
    await page.getByText('"alterations:execute"').first().waitFor();
    for (const name of ['Pause', 'Resume', 'Cancel plan', 'Revert', 'Change rollout'])
      expect(await page.getByRole('button', { name }).count(), name).toBe(0);
    const refused = await page.request.post(`${base}/console/plans/${pausedPlan}/resume`, {
      headers: { origin: base },
      form: {},
      maxRedirects: 0,
    });
    expect(refused.status()).toBe(403);
    expect(await refused.text()).toContain(
      'Missing permission: this operation requires &quot;alterations:execute&quot;',
    );
    expect(await planStatus(pausedPlan)).toBe(7);
    await page.goto(`${base}/console/new-plan`);
    await page.getByText('You may not make plans').waitFor();
    expect(await page.getByRole('button', { name: 'Submit plan' }).count()).toBe(0);
    await expectAccessible(page, 'New plan without the permission');
    await context.close();
  });

  it("never shows a tenant another tenant's plans, by list or by address", async () => {
    const key = await call('POST', '/identity/api-keys', {
      name: `acme ${run}`,
      permissions: ['alterations:*'],
      tenantId: `acme-${run}`,
    });
    const acmePlan = await submit(
      { id: `acme-plan-${run}`, alterations: [{ type: 'Cancel' }], filter: { correlationIds: ['nothing'] } },
      key.body.key,
    );
    const { context, page } = await signedIn(`acme-${run}`);
    await page.getByRole('link', { name: 'Plans', exact: true }).click();
    await page.getByRole('link', { name: acmePlan, exact: true }).waitFor();
    for (const other of [completedPlan, pausedPlan]) {
      expect(await page.getByRole('link', { name: other, exact: true }).count()).toBe(0);
      const answer = await page.goto(`${base}/console/plans/${other}`);
      expect(answer!.status()).toBe(404);
      await page.getByText(`Plan ${other} not found`).waitFor();
      expect((await page.request.get(`${base}/console/plans/${other}/events`)).status()).toBe(404);
    }
    await page.goto(`${base}/console/instances`);
    await page.getByText('No instances yet.').waitFor();
    // Nor by a dry run or a preview naming another tenant's plan in planJobs: refused as the API refuses it.
    for (const action of ['dry-run', 'preview']) {
      const named = await page.request.post(`${base}/console/new-plan`, {
        headers: { origin: base },
        form: {
          'plan-json': JSON.stringify({
            alterations: [{ type: 'Cancel' }],
            filter: { planJobs: { planId: completedPlan } },
          }),
          action,
        },
      });
      expect(named.status(), action).toBe(400);
      expect(await named.text()).toContain('Not a plan of this tenant');
    }
    await context.close();
  });

  it('ends a session at once on sign-out or when its user is deleted, an open plan page live stream within 10 s', async () => {
    for (const ending of ['sign-out', 'delete the user'] as const) {
      const name = `doomed-${ending === 'sign-out' ? 'a' : 'b'}-${run}`;
      const userId = await createUser(name, ['alterations:view']);
      const { context, page } = await signedIn(name);
      await page.goto(`${base}/console/plans/${pausedPlan}`);
      await page.getByText('Live: this page follows the plan as it runs.').waitFor();
      const started = Date.now();
      if (ending === 'sign-out') {
        const other = await context.newPage();
        await other.goto(`${base}/console/plans`);
        await other.getByRole('button', { name: 'Sign out' }).click();
        await other.getByText('You have signed out.').waitFor();
      } else {
        expect((await call('DELETE', `/identity/users/${userId}`)).status).toBe(204);
      }
      await page.getByText('Live updates ended: your session has ended.').waitFor({ timeout: 10_000 });
      expect(Date.now() - started).toBeLessThan(10_000);
      if (ending === 'delete the user') {
        // Page requests stop too, and say why, even after the live page's script heard of it first.
        const next = await context.newPage();
        await next.goto(`${base}/console/plans`);
        expect(new URL(next.url()).pathname).toBe('/console/sign-in');
        await next.getByText('Your session has ended').waitFor();
        await next.goto(`${base}/console/plans`);
        await next.getByText('Sign in to use the console.').waitFor();
      }
      await context.close();
    }
  });

  it('lists users and API keys with who created each, accessibly', async () => {
    await createUser(`idadmin-${run}`, ['identity/users:view', 'identity/api-keys:view', 'alterations:view']);
    expect(
      (await call('POST', '/identity/api-keys', { name: `ci ${run}`, permissions: ['alterations:view'] })).status,
    ).toBe(201);
    const { context, page } = await signedIn(`idadmin-${run}`);
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
    const users = page.getByRole('region', { name: 'Users and who created them' });
    const row = users.getByRole('row').filter({ has: page.getByRole('rowheader', { name: `op-${run}`, exact: true }) });
    await expect(row.getByRole('cell').nth(1).textContent()).resolves.toBe('ADMIN_API_KEY (API key)');
    const keys = page.getByRole('region', { name: 'API keys and who created them' });
    const keyRow = keys
      .getByRole('row')
      .filter({ has: page.getByRole('rowheader', { name: `ci ${run}`, exact: true }) });
    await expect(keyRow.getByRole('cell').nth(1).textContent()).resolves.toBe('ADMIN_API_KEY (API key)');
    await expectAccessible(page, 'Users');
    await context.close();
    // A user who may read neither is told so, with the permission named.
    const viewer = await signedIn(`viewer-${run}`);
    await viewer.page.goto(`${base}/console/users`);
    await viewer.page.getByText('You may not see users: that requires the permission "identity/users:view".').waitFor();
    await viewer.context.close();
  });

  it('shows an approver who may not read instances the paths a plan would change, never their values', async () => {
    const secret = `SECRET-VALUE-${run}`;
    const made = await call('POST', '/workflow-instances', {
      definitionId,
      correlationId: `console-secret-${run}`,
      variables: { note: secret },
    });
    expect(made.status).toBe(202);
    const planId = await submit({
      id: `secret-${run}`,
      alterations: [{ type: 'ModifyVariable', variableId: 'note', value: 'changed' }],
      filter: { correlationIds: [`console-secret-${run}`] },
      approval: { required: true },
    });
    await eventually(async () => (await planStatus(planId)) === 8, 'the plan to await approval');
    await createUser(`approver-blind-${run}`, ['alterations:approve', 'alterations:view']);
    const blind = await signedIn(`approver-blind-${run}`);
    await blind.page.getByRole('link', { name: 'Approvals', exact: true }).click();
    await blind.page.getByRole('heading', { name: `Preview of ${planId}` }).waitFor();
    expect(await blind.page.content()).not.toContain(secret);
    await blind.page
      .getByText('Values are shown to those who may read instances (workflows/instances:view)')
      .first()
      .waitFor();
    await blind.page.goto(`${base}/console/plans/${planId}`);
    await blind.page.getByRole('heading', { name: 'What it would do now' }).waitFor();
    expect(await blind.page.content()).not.toContain(secret);
    await blind.context.close();
    // One who may read instances sees the value it would change.
    const op = await signedIn(`op-${run}`);
    await op.page.goto(`${base}/console/plans/${planId}`);
    await op.page.getByRole('heading', { name: 'What it would do now' }).waitFor();
    expect(await op.page.content()).toContain(secret);
    await op.context.close();
    expect((await call('POST', `/alterations/${planId}/cancel`)).status).toBe(202);
  });

  it('finds what is broken on the Dashboard and Incidents, retries it with verify, and retries what the retry did not fix', async () => {
    const payments = `console-payments-${run}`;
    const published = await call('POST', '/workflow-definitions', {
      ...chain(payments, [writeLine('start', 'charging'), fault('charge', `Gateway timed out ${MARKUP}`)]),
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
    const faulted: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await call('POST', '/workflow-instances', { definitionId: payments });
      expect(r.status).toBe(202);
      faulted.push(r.body.workflowInstanceId);
    }
    await eventually(async () => {
      const r = await call('GET', `/workflow-instances/incidents?definitionId=${payments}`);
      return r.body.items[0]?.count === 3;
    }, 'the three instances to fault');

    const { context, page } = await signedIn(`op-${run}`);
    // The Dashboard: unfinished instances per definition by sub-status, the largest incident groups, the plans.
    const unfinished = page.getByRole('region', { name: 'Unfinished instances per definition' });
    const row = unfinished.getByRole('row', { name: new RegExp(payments) });
    await expect.poll(() => row.getByRole('link', { name: '3', exact: true }).count()).toBe(1);
    await page.getByRole('heading', { name: 'Open incidents' }).waitFor();
    await page
      .getByRole('region', { name: 'Largest incident groups' })
      .getByText(`Gateway timed out ${MARKUP}`)
      .waitFor();
    await page.getByRole('heading', { name: 'Awaiting approval' }).waitFor();
    // Its plans are live: one submitted now shows up awaiting approval without a reload.
    const held = await submit({
      alterations: [{ type: 'ModifyVariable', variableId: 'note', value: 'held' }],
      filter: { definitionIds: [payments] },
      approval: { required: true },
    });
    await page.getByRole('link', { name: held, exact: true }).waitFor({ timeout: 15_000 });
    expect((await call('POST', `/alterations/${held}/cancel`)).status).toBe(202);
    await expectAccessible(page, 'Dashboard');
    await screenshot(page, 'dashboard');
    await expectNoSidewaysScroll(page, 'Dashboard');

    // Incidents: Retry these opens New plan with the group's filter, a ScheduleActivity and verify filled in.
    await page.getByRole('link', { name: 'Incidents' }).click();
    await page.getByRole('heading', { name: 'Incidents', level: 1 }).waitFor();
    await expectAccessible(page, 'Incidents');
    await screenshot(page, 'incidents');
    const group = page.getByRole('row', { name: new RegExp(`${payments} v1`) });
    // A group's count lists its instances: the definition's, with an incident at its activity and its message.
    await group.getByRole('link', { name: '3', exact: true }).click();
    await page.getByRole('heading', { name: 'Instances', level: 1 }).waitFor();
    expect(await page.getByLabel('Incident at activity').inputValue()).toBe('charge');
    expect(await page.getByLabel('Incident message contains').inputValue()).toBe(`Gateway timed out ${MARKUP}`);
    const listed = page.getByRole('region', { name: 'Instances, newest first' });
    for (const id of faulted) await listed.getByRole('link', { name: id }).waitFor();
    expect(await listed.getByRole('row').count()).toBe(4);
    await page.getByLabel('Incident message contains').fill('Some other failure');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('No instance matches this filter.').waitFor();
    await page.goBack();
    await page.goBack();
    await group.getByRole('button', { name: 'Retry these' }).click();
    await page.getByRole('heading', { name: 'New plan', level: 1 }).waitFor();
    expect(await page.getByLabel('Expect (filter JSON)').inputValue()).toBe('{"hasIncidents":false}');
    expect(await page.getByLabel('Within (seconds)').inputValue()).toBe('300');
    expect(JSON.parse(await page.getByLabel('Plan JSON').inputValue())).toEqual({
      alterations: [{ type: 'ScheduleActivity', activityId: 'charge' }],
      filter: {
        definitionIds: [payments],
        incidentFilters: [{ activityId: 'charge', messageContains: `Gateway timed out ${MARKUP}` }],
      },
      verify: { expect: { hasIncidents: false }, withinSeconds: 300 },
    });
    await expectAccessible(page, 'New plan from Retry these');
    // The charge faults again: nothing is fixed. Two seconds say so sooner than five minutes.
    await page.getByLabel('Within (seconds)').fill('2');
    await page.getByLabel('Plan id (optional)').fill(`retry-these-${run}`);
    await page.getByRole('button', { name: 'Submit plan' }).click();
    await page.waitForURL(`${base}/console/plans/retry-these-${run}?notice=submitted`);
    await eventually(async () => (await statusOf(page).innerText()) === 'Completed', 'the retry to complete', 60_000);
    // Live, without a reload: the counts, and the jobs with their verification.
    await eventually(
      async () => (await page.locator('[data-field="unverified"]').innerText()) === '3',
      'three jobs Unverified on the page',
    );
    expect(await page.locator('[data-field="verified"]').innerText()).toBe('0');
    const jobs = page.getByRole('region', { name: 'Jobs of the plan' });
    await eventually(
      async () => (await jobs.getByRole('cell', { name: 'Completed · Unverified' }).count()) === 3,
      'the jobs Completed and Unverified on the page',
    );
    await expectAccessible(page, 'A plan with verify');
    await screenshot(page, 'plan-verify');
    // Retry failed: a new plan over the jobs not verified, named as the retry of this one.
    await page.getByRole('button', { name: 'Retry failed' }).click();
    await page.waitForURL(/\/console\/plans\/[^/?]+\?notice=submitted/);
    const retryId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    expect(retryId).not.toBe(`retry-these-${run}`);
    const retry = await call('GET', `/alterations/${retryId}`);
    expect(retry.body.plan).toMatchObject({
      retryOf: `retry-these-${run}`,
      verification: { withinSeconds: 2 },
      workflowInstanceFilter: { planJobs: { planId: `retry-these-${run}` } },
    });

    // An instance: the plans that changed it, and Retry where it has incidents.
    await page.goto(`${base}/console/instances/${faulted[0]}`);
    await page.getByRole('heading', { name: 'Changes' }).waitFor();
    await page
      .getByRole('region', { name: 'Plans that changed this instance' })
      .getByRole('link', { name: `retry-these-${run}` })
      .waitFor();
    await expectAccessible(page, "An instance's Changes");
    await screenshot(page, 'instance-changes');
    await page.getByRole('button', { name: 'Retry' }).click();
    await page.getByRole('heading', { name: 'New plan', level: 1 }).waitFor();
    expect(JSON.parse(await page.getByLabel('Plan JSON').inputValue())).toMatchObject({
      filter: { workflowInstanceIds: [faulted[0]] },
      verify: { expect: { hasIncidents: false } },
    });
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('draws a definition version with its counts, and Migrate these drafts a migration to the latest version', async () => {
    const { context, page } = await signedIn(`op-${run}`);
    // A second version of the console's definition: version 1's instances may move to it.
    const v2 = await call('POST', '/workflow-definitions', {
      ...approvalWithNote(definitionId),
      name: `Orders ${MARKUP}`,
    });
    expect(v2.status, JSON.stringify(v2.body)).toBe(201);
    await page.getByRole('link', { name: 'Definitions' }).click();
    await page.getByRole('heading', { name: 'Definitions', level: 1 }).waitFor();
    await page.getByRole('link', { name: definitionId, exact: true }).click();
    await page.getByRole('link', { name: 'Version 1' }).click();
    const chart = page.getByRole('group', { name: new RegExp(`The flowchart of Orders .* version 1`) });
    await chart.waitFor();
    // Each activity a labelled element with its counts, reached by the keyboard.
    const waiting = chart.getByRole('img', { name: /^wait \(Event\): \d+ waiting, 0 scheduled, 0 faulted$/ });
    await waiting.waitFor();
    expect(Number((await waiting.getAttribute('aria-label'))!.match(/: (\d+) waiting/)![1])).toBeGreaterThan(100);
    await chart.getByRole('img', { name: 'start (WriteLine): 0 waiting, 0 scheduled, 0 faulted' }).focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.getAttribute("aria-label")')).toMatch(/^wait \(Event\)/);
    // Every seeded instance waits on "wait": the box says so, and so does the table.
    const activities = page.getByRole('region', { name: 'Activities and their unfinished instances' });
    const waitRow = activities.getByRole('row', { name: /^wait/ });
    expect(Number((await waitRow.getByRole('cell').nth(1).innerText()).replace(/,/g, ''))).toBeGreaterThan(100);
    await expectAccessible(page, 'A definition version');
    await screenshot(page, 'definition');
    await expectNoSidewaysScroll(page, 'A definition version');
    await page.getByRole('button', { name: 'Migrate these' }).click();
    await page.getByRole('heading', { name: 'New plan', level: 1 }).waitFor();
    const json = JSON.parse(await page.getByLabel('Plan JSON').inputValue());
    expect(json).toMatchObject({
      alterations: [
        {
          type: 'Migrate',
          targetVersion: 2,
          activityMappings: expect.arrayContaining([{ source: 'wait', target: 'wait' }]),
        },
      ],
      filter: { definitionIds: [definitionId], definitionVersionIds: [versionId], statuses: ['Running'] },
    });
    await page.getByText(/Drafted from version 1 to 2/).waitFor();
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('reads the audit trail: filtered by action, exported, and the entries about a plan on its page', async () => {
    await createUser(`auditor-${run}`, ['audit:view', 'alterations:view']);
    // Someone without audit:view is told what it takes.
    const op = await signedIn(`op-${run}`);
    await op.page.getByRole('link', { name: 'Audit', exact: true }).click();
    await op.page.getByText('"audit:view"').first().waitFor();
    await op.context.close();

    const { context, page } = await signedIn(`auditor-${run}`);
    await page.getByRole('link', { name: 'Audit', exact: true }).click();
    await page.getByRole('heading', { name: 'Audit', level: 1 }).waitFor();
    await page.getByLabel('Action').fill('plan.submit');
    await page.getByRole('button', { name: 'Show' }).click();
    const entries = page.getByRole('region', { name: 'Audit entries' });
    // The canary plan's submit, by the harness's admin key, with its outcome.
    const row = entries.getByRole('row', { name: new RegExp(`plan canary-${run}`) });
    await row.waitFor();
    expect(await row.getByRole('cell').allInnerTexts()).toEqual([
      'admin (ADMIN_API_KEY)',
      'plan.submit',
      `plan canary-${run}`,
      '202',
    ]);
    // The two plans submitted first, at least.
    expect(await entries.locator('tbody tr').count()).toBeGreaterThanOrEqual(2);
    for (const action of await entries.locator('tbody td:nth-child(3)').allInnerTexts())
      expect(action).toBe('plan.submit');
    await expectAccessible(page, 'Audit');
    await screenshot(page, 'audit');
    await expectNoSidewaysScroll(page, 'Audit');

    // The export: the same selection, one entry a line.
    const download = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Export these (NDJSON)' }).click();
    const file = await (await download).path();
    const { readFile } = await import('node:fs/promises');
    const lines = (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action: string });
    expect(lines.length).toBeGreaterThanOrEqual(await entries.locator('tbody tr').count());
    expect(new Set(lines.map((l) => l.action))).toEqual(new Set(['plan.submit']));
    // A time that is none never widens the export to the whole trail.
    const wrongTime = await page.request.get(`${base}/console/audit/export?from=2099-13-01T00:00`);
    expect(wrongTime.status()).toBe(400);

    // A plan's page lists the entries about it.
    await page.goto(`${base}/console/plans/${pausedPlan}`);
    const trail = page.getByRole('region', { name: 'Audit entries about this plan' });
    await trail.getByRole('row', { name: /plan\.submit/ }).waitFor();
    await context.close();
  });

  it('logged no CSP violation and opened no dialog on any page', () => {
    expect(cspViolations).toEqual([]);
    expect(dialogs).toEqual([]);
  });
});
