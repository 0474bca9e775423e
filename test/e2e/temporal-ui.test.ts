import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * The Temporal UI as a user sees it, in a headless Chromium (Debian's `chromium`, driven by
 * playwright-core): the service started as `npm start` starts it (embedded dev server with its UI), a plan
 * run through the HTTP API, then the plan's page and a list filtered by its search attribute.
 * Screenshots go to WFA_SCREENSHOT_DIR (default: a temporary folder).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// In CI the browser is installed (.ci/run); elsewhere a machine without it skips this file, saying so.
const available = existsSync(CHROMIUM);
if (!available && !process.env.CI)
  console.warn(`temporal-ui.test.ts skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or CHROMIUM_PATH)`);

const run = randomBytes(4).toString('hex');
let adminKey: string;
const planId = `ui-plan-${run}`;
const definitionId = `ui-orders-${run}`;
let service: SpawnedService;
let work: string;
let api: string;
let ui: string;
let temporalAddress: string;
let browser: Browser;
let shots: string;

const call = async (method: string, p: string, body?: unknown) => {
  const res = await fetch(api + p, {
    method,
    headers: { authorization: `ApiKey ${adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
};

beforeAll(async () => {
  if (!available) return;
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-ui-'));
  shots = process.env.WFA_SCREENSHOT_DIR ?? path.join(work, 'screenshots');
  await mkdir(shots, { recursive: true });
  const [temporalPort, uiPort] = [await freePort(), await freePort()];
  ui = `http://127.0.0.1:${uiPort}`;
  temporalAddress = `127.0.0.1:${temporalPort}`;
  // Its own dev server with the Web UI, as `npm start` runs it (an empty TEMPORAL_ADDRESS is unset).
  service = await spawnService('ui', work, {
    TEMPORAL_ADDRESS: '',
    TEMPORAL_DEV_SERVER_PORT: String(temporalPort),
    TEMPORAL_UI_PORT: String(uiPort),
    ALTERATION_BATCH_SIZE: '100',
  });
  api = service.url;
  adminKey = service.adminKey;
  const deadline = Date.now() + 120_000;
  const def = await call('POST', '/workflow-definitions', approvalWithNote(definitionId));
  const pool = new pg.Pool({ connectionString: service.databaseUrl, max: 1 });
  await seedInstances(pool, { definitionVersionId: def.body.id, count: 500, variables: { amount: 0 } });
  await pool.end();
  const submitted = await call('POST', '/alterations/submit', {
    id: planId,
    alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 42 }],
    filter: { definitionIds: [definitionId] },
  });
  expect(submitted.status).toBe(202);
  while ((await call('GET', `/alterations/${planId}`)).body.plan.status !== 4) {
    if (Date.now() > deadline) throw new Error('the plan did not complete');
    await new Promise((r) => setTimeout(r, 200));
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await service?.stop();
  if (work && !process.env.WFA_SCREENSHOT_DIR) await rm(work, { recursive: true, force: true });
});

/** The text of the page and all its frames, once it contains every one of `wanted` (or after 30 s). */
async function eventuallyText(page: Page, wanted: string[]): Promise<string> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const texts = await Promise.all(
      page.frames().map((f) =>
        f
          .locator('body')
          .innerText({ timeout: 1_000 })
          .catch(() => ''),
      ),
    );
    const text = texts.join('\n');
    if (wanted.every((w) => text.includes(w)) || Date.now() > deadline) return text;
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe.skipIf(!available)('the Temporal UI, in Chromium', () => {
  it("shows a plan's summary and live details on its page", async () => {
    const connection = await Connection.connect({ address: temporalAddress });
    const { runId } = await new Client({ connection }).workflow.getHandle(`alteration-plan-${planId}`).describe();
    await connection.close();
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto(`${ui}/namespaces/default/workflows/alteration-plan-${planId}/${runId}/history`);
    const summary = `ModifyVariable amount on instances of ${definitionId}`;
    // The history: each batch activity named by its job range, the job counts in the result.
    await page.getByText('runJobBatch • jobs 0–99 of 500').first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: path.join(shots, 'plan-history.png'), fullPage: true });
    // The summary and the current details, on the User Metadata tab (Temporal UI 2.42).
    await page.getByText('User Metadata', { exact: true }).first().click();
    // The UI renders summaries and details (markdown) in sandboxed frames: read every frame's text.
    const text = await eventuallyText(page, [summary, '500 jobs done of 500 (100%)', 'jobs 400–499 of 500']);
    await page.screenshot({ path: path.join(shots, 'plan-metadata.png'), fullPage: true });
    expect(text).toContain(summary);
    expect(text).toContain('Completed · 500 jobs done of 500 (100%) · 0 failed · batch 5 of 5');
    await page.close();
  });

  it('lists plans filtered by AlterationPlanStatus', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const query = encodeURIComponent(`AlterationPlanStatus = "Completed" AND AlterationTenant = "default"`);
    await page.goto(`${ui}/namespaces/default/workflows?query=${query}`);
    await page.getByText(`alteration-plan-${planId}`).first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: path.join(shots, 'plans-completed.png'), fullPage: true });
    await page.goto(
      `${ui}/namespaces/default/workflows?query=${encodeURIComponent('AlterationPlanStatus = "Running"')}`,
    );
    await page.waitForLoadState('networkidle');
    expect(await page.content()).not.toContain(`alteration-plan-${planId}`);
    await page.close();
  });

  it("shows on a finished instance's page what ran, though every step ran inside Postgres", async () => {
    const id = (await call('POST', '/workflow-instances', { definitionId })).body.workflowInstanceId as string;
    expect((await call('POST', '/events/approve/trigger', { workflowInstanceId: id })).status).toBe(200);
    const connection = await Connection.connect({ address: temporalAddress });
    const handle = new Client({ connection }).workflow.getHandle(`workflow-instance-${id}`);
    const deadline = Date.now() + 90_000;
    while ((await handle.describe().catch(() => undefined))?.status.name !== 'COMPLETED') {
      if (Date.now() > deadline) throw new Error(`workflow-instance-${id} did not complete within 90 s`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const { runId } = await handle.describe();
    await connection.close();
    const summary = `finished · ${definitionId} v1 · ran start, wait, done`;
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    // The History tab, where the page opens: its Result panel.
    await page.goto(`${ui}/namespaces/default/workflows/workflow-instance-${id}/${runId}/history`);
    const history = await eventuallyText(page, [summary, '"executedActivityIds"']);
    await page.screenshot({ path: path.join(shots, 'instance-finished.png'), fullPage: true });
    expect(history).toContain(summary);
    expect(history).toMatch(/"executedActivityIds":\s*\[\s*"start",\s*"wait",\s*"done"\s*\]/);
    // The User Metadata tab: the same, as its current details.
    await page.getByText('User Metadata', { exact: true }).first().click();
    const metadata = await eventuallyText(page, [`Finished/Finished`, 'ran start, wait, done']);
    await page.screenshot({ path: path.join(shots, 'instance-finished-metadata.png'), fullPage: true });
    expect(metadata).toContain(summary);
    await page.close();
  }, 180_000);

  it('shows a suspended instance as Running and a cancelled one as Canceled', async () => {
    const start = async () =>
      (await call('POST', '/workflow-instances', { definitionId })).body.workflowInstanceId as string;
    const waiting = await start();
    const cancelled = await start();
    const r = await call('POST', '/alterations/run', {
      alterations: [{ type: 'Cancel' }],
      workflowInstanceIds: [cancelled],
    });
    expect(r.body.results[0].isSuccessful).toBe(true);
    // Temporal first, through its API: the relay tells each workflow after the commit. A failure here names what
    // Temporal holds, apart from how the UI shows it.
    const connection = await Connection.connect({ address: temporalAddress });
    const temporal = new Client({ connection });
    const reaches = async (instanceId: string, execution: string, status: string) => {
      const deadline = Date.now() + 90_000;
      for (;;) {
        const d = await temporal.workflow
          .getHandle(`workflow-instance-${instanceId}`)
          .describe()
          .catch(() => undefined);
        const shown = d?.searchAttributes?.WorkflowInstanceStatus?.[0];
        if (d?.status.name === execution && shown === status) return;
        if (Date.now() > deadline) {
          const api = (await call('GET', `/workflow-instances/${instanceId}`)).body;
          throw new Error(
            `workflow-instance-${instanceId} is ${d ? `${d.status.name} with WorkflowInstanceStatus ${String(shown)}` : 'not in Temporal'} ` +
              `after 90 s, not ${execution} with ${status}; the API has it ${api?.status}/${api?.subStatus}`,
          );
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    await reaches(waiting, 'RUNNING', 'Running/Suspended');
    await reaches(cancelled, 'CANCELLED', 'Finished/Cancelled');
    const { runId } = await temporal.workflow.getHandle(`workflow-instance-${cancelled}`).describe();
    await connection.close();

    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    /** The workflow list filtered by `query`, once it lists `workflowId`. */
    const listed = async (query: string, workflowId: string, shot: string) => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        await page.goto(`${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
        const found = await page
          .getByText(workflowId)
          .first()
          .waitFor({ timeout: 5_000 })
          .then(() => true)
          .catch(() => false);
        if (found) break;
        if (Date.now() > deadline)
          throw new Error(`${workflowId} is not listed for ${query} within 60 s, although Temporal's API has it so`);
      }
      await page.screenshot({ path: path.join(shots, shot), fullPage: true });
    };
    await listed(
      `WorkflowDefinitionId = "${definitionId}" AND WorkflowInstanceStatus = "Running/Suspended" AND ExecutionStatus = "Running"`,
      `workflow-instance-${waiting}`,
      'instance-running.png',
    );
    await listed(
      `WorkflowDefinitionId = "${definitionId}" AND WorkflowInstanceStatus = "Finished/Cancelled" AND ExecutionStatus = "Canceled"`,
      `workflow-instance-${cancelled}`,
      'instance-canceled.png',
    );
    // Its page says Canceled, as the API says Cancelled.
    await page.goto(`${ui}/namespaces/default/workflows/workflow-instance-${cancelled}/${runId}/history`);
    const text = await eventuallyText(page, ['Canceled']);
    expect(text).toContain('Canceled');
    await page.close();
  }, 180_000);
});
