import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';
import { runWfa } from '../support/wfa.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote, connect, event, flowchart, writeLine } from '../support/workflows.js';

/**
 * Change management from a terminal, as a team runs it: `wfa` spawned against a spawned service, one principal
 * submitting, a second one (a user's own API key) reviewing and deciding.
 */
const run = randomBytes(4).toString('hex');
let service: SpawnedService;
let url: string;
let work: string;
let pool: pg.Pool;
let reviewerKey: string;

const wfa = (args: string[], key = service.adminKey) => runWfa(args, work, { WFA_URL: url, WFA_API_KEY: key });
const asReviewer = (args: string[]) => wfa(args, reviewerKey);

async function file(name: string, body: unknown): Promise<string> {
  const p = path.join(work, name);
  await writeFile(p, JSON.stringify(body));
  return p;
}

async function api(method: string, route: string, body: unknown, auth: string): Promise<Response> {
  return fetch(`${url}${route}`, {
    method,
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function planStatus(planId: string): Promise<{ status: number; jobCounts: { completed: number } }> {
  return JSON.parse((await wfa(['--json', 'plans', 'show', planId])).out);
}

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 30_000): Promise<T> {
  let v = await read();
  for (const deadline = Date.now() + ms; !done(v) && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 300));
    v = await read();
  }
  return v;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-cli-gov-'));
  service = await spawnService('cli-gov', work, { ALTERATION_BATCH_SIZE: '50' });
  url = service.url;
  pool = new pg.Pool({ connectionString: service.databaseUrl, max: 2 });
  // The reviewer: a user of its own, with a key it made itself (a key counts as its maker for four eyes).
  const password = `reviewer-${run}-password`;
  const created = await api(
    'POST',
    '/identity/users',
    {
      name: `reviewer-${run}`,
      password,
      permissions: ['alterations:view', 'alterations:approve', 'identity/api-keys:create'],
    },
    `ApiKey ${service.adminKey}`,
  );
  expect(created.status).toBe(201);
  const login = await api('POST', '/identity/login', { username: `reviewer-${run}`, password }, '');
  const { accessToken } = (await login.json()) as { accessToken: string };
  const key = await api(
    'POST',
    '/identity/api-keys',
    { name: 'reviewer cli', permissions: ['alterations:view', 'alterations:approve'] },
    `Bearer ${accessToken}`,
  );
  expect(key.status).toBe(201);
  reviewerKey = ((await key.json()) as { key: string }).key;

  expect(await wfa(['definitions', 'publish', await file('def.json', approvalWithNote(`gov-${run}`))])).toMatchObject({
    code: 0,
  });
  const { rows } = await pool.query<{ id: string }>('SELECT id FROM workflow_definitions WHERE definition_id = $1', [
    `gov-${run}`,
  ]);
  await seedInstances(pool, { definitionVersionId: rows[0]!.id, count: 120, variables: { amount: 0 } });
}, 150_000);

afterAll(async () => {
  await pool?.end();
  await service?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('wfa and change management', () => {
  it('shows and sets the policy; above without a threshold is refused with the reason', async () => {
    const shown = await wfa(['policy', 'show']);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('plans need approval only when their submitter asks for it');
    const bad = await wfa(['policy', 'set', '--approval', 'above']);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/approvalThreshold/);
    const set = await wfa(['--json', 'policy', 'set', '--approval', 'above', '--threshold', '100']);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.out)).toEqual({ approval: 'above', approvalThreshold: 100, approvalTtlSeconds: 604800 });
    expect((await wfa(['policy', 'show'])).out).toContain('plans matching more than 100 instances need approval');
  });

  it('a plan over the threshold waits; its submitter cannot approve it, the reviewer reads it and approves it', async () => {
    const planId = `gov-approve-${run}`;
    const plan = await file('plan.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
      filter: { definitionIds: [`gov-${run}`] },
    });
    const submitted = await wfa(['plans', 'submit', plan, '--id', planId]);
    expect(submitted.code).toBe(0);
    const shown = await wfa(['plans', 'show', planId]);
    expect(shown.out).toContain('AwaitingApproval');
    expect(shown.out).toMatch(/approval Pending: asked by .* for 120 instances, until /);
    expect((await wfa(['plans', 'list', '--status', '8'])).out).toContain(planId);

    const own = await wfa(['plans', 'approve', planId]);
    expect(own.code).not.toBe(0);
    expect(own.err).toContain('A plan cannot be approved by the principal that submitted it');

    const review = await asReviewer(['plans', 'review', planId, '--limit', '2']);
    expect(review.code).toBe(0);
    expect(review.out).toContain('120');
    expect(review.out).toContain('/variables/amount');
    // The reviewer may not read instances: the paths that change, without their values.
    expect(review.out).toContain('values shown to those who may read instances');

    const approved = await asReviewer(['plans', 'approve', planId, '--comment', 'checked the preview']);
    expect(approved).toMatchObject({ code: 0, err: '' });
    expect(approved.out).toMatch(new RegExp(`^Approved plan ${planId}: `));
    const done = await until(
      () => planStatus(planId),
      (p) => p.status === 4,
    );
    expect(done).toMatchObject({ status: 4, jobCounts: { completed: 120 } });
    const after = await wfa(['plans', 'show', planId]);
    expect(after.out).toMatch(/approval Approved: .* decided by reviewer cli \(API key\) at .*: checked the preview/);
  });

  it('the reviewer rejects a plan that asked for review: Cancelled, its jobs Cancelled', async () => {
    await wfa(['policy', 'set', '--approval', 'never']);
    const planId = `gov-reject-${run}`;
    const plan = await file('small.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 8 }],
      filter: { definitionIds: [`gov-${run}`] },
    });
    expect(await wfa(['plans', 'submit', plan, '--id', planId, '--require-approval'])).toMatchObject({ code: 0 });
    expect((await planStatus(planId)).status).toBe(8);
    const rejected = await asReviewer(['reject', planId, '--comment', 'not this week']);
    expect(rejected).toMatchObject({ code: 0, err: '' });
    expect(rejected.out).toBe(`Rejected plan ${planId}: Cancelled\n`);
    const shown = JSON.parse((await wfa(['--json', 'plans', 'show', planId])).out);
    expect(shown).toMatchObject({
      status: 6,
      jobCounts: { total: 120, cancelled: 120, completed: 0 },
      approval: { state: 'Rejected' },
    });
    const again = await asReviewer(['plans', 'approve', planId]);
    expect(again.code).not.toBe(0);
    expect(again.err).toMatch(/not AwaitingApproval|409|Cancelled/);
  });

  it('a plan not before an hour from now waits, paused by its schedule; resume says when, --ignore-schedule runs it', async () => {
    const planId = `gov-later-${run}`;
    const plan = await file('later.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 9 }],
      filter: { definitionIds: [`gov-${run}`] },
    });
    const notBefore = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    expect(await wfa(['plans', 'submit', plan, '--id', planId, '--not-before', notBefore])).toMatchObject({ code: 0 });
    const paused = await until(
      () => planStatus(planId),
      (p) => p.status === 7,
    );
    expect(paused).toMatchObject({ status: 7, pauseReason: 'schedule', jobCounts: { completed: 0 } });
    expect((await wfa(['plans', 'show', planId])).out).toContain('paused by its schedule; goes on by itself at');
    const refused = await wfa(['plans', 'resume', planId]);
    expect(refused.code).not.toBe(0);
    expect(refused.err).toContain(`the next one opens at ${notBefore.replace('Z', '.000Z')}`);
    // The API's advice, in the CLI's words: the option to pass, not a request body.
    expect(refused.err).toContain(`Resume with wfa plans resume ${planId} --ignore-schedule to run it now`);
    expect(refused.err).not.toContain('ignoreSchedule');
    const forced = await wfa(['plans', 'resume', planId, '--ignore-schedule']);
    expect(forced.code).toBe(0);
    const done = await until(
      () => planStatus(planId),
      (p) => p.status === 4,
    );
    expect(done).toMatchObject({ status: 4, jobCounts: { completed: 120 } });
  });

  it('drafts the activity mappings of a version that renamed the step instances wait in', async () => {
    const definitionId = `draft-${run}`;
    const v1 = flowchart(
      definitionId,
      [
        writeLine('start', 'started'),
        { ...event('wait', 'approve'), name: 'Wait for approval' },
        { ...writeLine('old-only', 'gone'), name: 'Gone in v2' },
      ],
      [connect('start', 'wait')],
    );
    const v2 = flowchart(
      definitionId,
      [writeLine('start', 'started'), { ...event('await-approval', 'approve'), name: 'Wait for approval' }],
      [connect('start', 'await-approval')],
    );
    expect(await wfa(['definitions', 'publish', await file('v1.json', v1)])).toMatchObject({ err: '', code: 0 });
    expect(await wfa(['definitions', 'publish', await file('v2.json', v2)])).toMatchObject({ code: 0 });
    const json = await wfa(['--json', 'definitions', 'migration-draft', definitionId, '--from', '1', '--to', '2']);
    expect(json).toMatchObject({ code: 0, err: '' });
    expect(JSON.parse(json.out)).toEqual({
      definitionId,
      from: 1,
      to: 2,
      mappings: [
        { source: 'start', target: 'start', reason: 'sameId' },
        { source: 'wait', target: 'await-approval', reason: 'sameTypeAndName' },
      ],
      unmapped: [{ activityId: 'old-only', type: 'Elsa.WriteLine', name: 'Gone in v2' }],
    });
    const human = await wfa(['draft', definitionId, '--from', '1', '--to', '2']);
    expect(human.out).toContain('1 activities keep their id, 1 mapped by type and name, 1 unmapped');
    expect(human.out).toContain(
      '{"type":"Migrate","targetVersion":2,"activityMappings":[{"source":"wait","target":"await-approval"}]}',
    );
    const missing = await wfa(['definitions', 'migration-draft', definitionId, '--from', '1', '--to', '9']);
    expect(missing.code).not.toBe(0);
    expect(missing.err).toContain(`Workflow definition ${definitionId} version 9 not found`);
  });
});
