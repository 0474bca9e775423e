import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Maintenance windows (contract section 10) end to end, on real Postgres and Temporal: notBefore, a window
 * that opens during the test, a window that closes under a running plan (no batch starts after it), resume
 * outside a window (409 naming the next start, or ignoreSchedule), a manual pause across a window, an
 * approved plan following its schedule, and the 400s of a bad schedule.
 *
 * Windows are whole minutes of wall clock: the file picks the next minute boundary B at least 20 s ahead, and
 * submits in beforeAll one plan whose window opens at B and one whose window closes at B, so the wait for B
 * overlaps the other tests.
 */
let h: Harness;
const run = Math.random().toString(36).slice(2, 8);
const definitionId = `win-${run}`;
let versionId: string;
let seq = 0;

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/** The wall clock at `at` in `timeZone`: "HH:MM" and the day as the contract spells it. */
function wall(at: number, timeZone: string): { hhmm: string; day: string } {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    hour: '2-digit',
    minute: '2-digit',
    weekday: 'short',
  }).formatToParts(new Date(at));
  const part = (type: string) => parts.find((x) => x.type === type)!.value;
  return { hhmm: `${part('hour')}:${part('minute')}`, day: part('weekday') };
}

/** A window from `from` to `to` (instants on minute boundaries) as a user in `timeZone` writes it. */
function windowOf(from: number, to: number, timeZone: string) {
  const start = wall(from, timeZone);
  return { days: [start.day], from: start.hhmm, to: wall(to, timeZone).hhmm, timeZone };
}

async function seed(count: number) {
  const prefix = `${run}w${++seq}w`;
  const ids = await seedInstances(h.pool, {
    definitionVersionId: versionId,
    count,
    variables: { amount: 0 },
    namePrefix: prefix,
  });
  return { ids, filter: { searchTerm: prefix } };
}

const setAmount = (value: number) => [{ type: 'ModifyVariable', variableId: 'amount', value }];

async function submit(body: Record<string, unknown>, key?: string): Promise<string> {
  const r = await h.request('POST', '/alterations/submit', { body, ...(key ? { key } : {}) });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.planId as string;
}

const view = async (planId: string) => {
  const r = await h.request('GET', `/alterations/${planId}`);
  expect(r.status).toBe(200);
  return r.body.plan as Record<string, any>;
};

const untilPlan = (planId: string, ok: (plan: Record<string, any>) => boolean, what: string, timeoutMs = 30_000) =>
  eventually(
    async () => {
      const plan = await view(planId);
      return ok(plan) ? plan : undefined;
    },
    `plan ${planId} ${what}`,
    timeoutMs,
  );

const pausedBySchedule = (plan: Record<string, any>) => plan.status === 7 && plan.pauseReason === 'schedule';

/** The plan's job rows: how many, and the first and last moments a batch started one (ms). */
async function jobStarts(planId: string): Promise<{ n: number; first: number | null; last: number | null }> {
  const { rows } = await h.pool.query<{ n: number; first: Date | null; last: Date | null }>(
    `SELECT count(*)::int AS n, min(started_at) AS first, max(started_at) AS last
       FROM alteration_jobs WHERE plan_id = $1 AND status IN (2, 3)`,
    [planId],
  );
  const r = rows[0]!;
  return { n: r.n, first: r.first?.getTime() ?? null, last: r.last?.getTime() ?? null };
}

async function amounts(ids: string[]): Promise<unknown[]> {
  const { rows } = await h.pool.query<{ amount: unknown }>(
    `SELECT variables -> 'amount' AS amount FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY id`,
    [ids],
  );
  return rows.map((r) => r.amount);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The boundary both long plans turn at, the start of the window the closing plan runs in. */
let boundary: number;
let closingStart: number;
/** A plan whose window opens at the boundary (America/New_York), and one whose window closes there (Asia/Kolkata). */
let opening: { planId: string; ids: string[] };
let closing: { planId: string; ids: string[] };

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 100, window: 2, batchesPerRun: 500 } });
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote(definitionId) });
  expect(def.status).toBe(201);
  versionId = def.body.id;

  const now = Date.now();
  closingStart = Math.floor(now / MINUTE) * MINUTE;
  boundary = closingStart + MINUTE;
  if (boundary - now < 20_000) boundary += MINUTE;

  const o = await seed(3);
  opening = {
    ids: o.ids,
    planId: await submit({
      alterations: setAmount(1),
      filter: o.filter,
      schedule: { windows: [windowOf(boundary, boundary + 10 * MINUTE, 'America/New_York')] },
    }),
  };
  // Two jobs a second: it is still running when its window closes.
  const c = await seed(200);
  closing = {
    ids: c.ids,
    planId: await submit({
      alterations: setAmount(2),
      filter: c.filter,
      rollout: { rate: 2 },
      schedule: { windows: [windowOf(closingStart, boundary, 'Asia/Kolkata')] },
    }),
  };
}, 120_000);

afterAll(() => h?.close());

describe('a window that opens and one that closes during the test: before the boundary', () => {
  it('before the window opens, the plan is Paused by its schedule until then, with no job', async () => {
    expect(Date.now()).toBeLessThan(boundary);
    const paused = await untilPlan(opening.planId, pausedBySchedule, 'paused by its schedule');
    expect(paused.resumesAt).toBe(new Date(boundary).toISOString());
    expect(paused.startedAt).toBeNull();
    expect((await jobStarts(opening.planId)).n).toBe(0);
    expect(await amounts(opening.ids)).toEqual([0, 0, 0]);
    // The other plan runs in its window meanwhile.
    const running = await untilPlan(closing.planId, (p) => p.status === 3, 'running');
    expect(running.resumesAt).toBeNull();
  });
});

describe('a schedule that is not valid', () => {
  const window = { days: ['Mon'], from: '22:00', to: '02:00', timeZone: 'Europe/Berlin' };
  it.each([
    ['an unknown zone', { windows: [{ ...window, timeZone: 'Mars/Olympus_Mons' }] }, '/schedule/windows/0/timeZone'],
    ['an offset for a zone', { windows: [{ ...window, timeZone: '+05:30' }] }, '/schedule/windows/0/timeZone'],
    ['a time past 23:59', { windows: [{ ...window, from: '24:00' }] }, '/schedule/windows/0/from'],
    ['a time without two digits', { windows: [window, { ...window, to: '2:00' }] }, '/schedule/windows/1/to'],
    ['empty days', { windows: [{ ...window, days: [] }] }, '/schedule/windows/0/days'],
    ['an unknown day', { windows: [{ ...window, days: ['Monday'] }] }, '/schedule/windows/0/days/0'],
    ['no windows in a list', { windows: [] }, '/schedule/windows'],
    ['a notBefore without an offset', { notBefore: '2030-01-01T00:00:00' }, '/schedule/notBefore'],
  ])('%s is a 400 naming the field', async (_what, schedule, path) => {
    const { filter } = await seed(1);
    const r = await h.request('POST', '/alterations/submit', {
      body: { alterations: setAmount(9), filter, schedule },
    });
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
    expect(r.body.errors.map((e: { path: string }) => e.path)).toContain(path);
  });
});

describe('notBefore', () => {
  it('holds the plan Paused by its schedule until then, generating nothing, and then it runs by itself', async () => {
    const { ids, filter } = await seed(3);
    const at = Date.now() + 4_000;
    // Written with an offset other than Z: the same instant.
    const local = new Date(at + 2 * 3_600_000).toISOString().replace('Z', '+02:00');
    const planId = await submit({ alterations: setAmount(5), filter, schedule: { notBefore: local } });
    const paused = await untilPlan(planId, pausedBySchedule, 'paused by its schedule');
    expect(paused.resumesAt).toBe(new Date(at).toISOString());
    expect(paused.schedule).toEqual({ notBefore: local });
    expect(paused.startedAt).toBeNull();
    expect(paused.jobCounts.total).toBe(0);
    expect((await jobStarts(planId)).n).toBe(0);
    expect(await amounts(ids)).toEqual([0, 0, 0]);
    const list = await h.request('GET', '/alterations?status=7');
    expect(list.body.items.find((i: { id: string }) => i.id === planId)).toMatchObject({
      pauseReason: 'schedule',
      resumesAt: new Date(at).toISOString(),
    });

    const done = await untilPlan(planId, (p) => p.status === 4, 'to complete', 20_000);
    expect(done).toMatchObject({ pauseReason: null, resumesAt: null });
    expect(Date.parse(done.startedAt)).toBeGreaterThanOrEqual(at);
    const jobs = await jobStarts(planId);
    expect(jobs.n).toBe(3);
    expect(jobs.first).toBeGreaterThanOrEqual(at);
    expect(await amounts(ids)).toEqual([5, 5, 5]);
  });

  it('a manual pause holds past notBefore; a resume then runs the plan', async () => {
    const { ids, filter } = await seed(2);
    const at = Date.now() + 2_000;
    const planId = await submit({
      alterations: setAmount(6),
      filter,
      schedule: { notBefore: new Date(at).toISOString() },
    });
    await untilPlan(planId, pausedBySchedule, 'paused by its schedule');
    expect((await h.request('POST', `/alterations/${planId}/pause`)).status).toBe(202);
    const manual = await view(planId);
    expect(manual).toMatchObject({ status: 7, pauseReason: 'manual', resumesAt: null });
    await sleep(at - Date.now() + 3_000);
    expect(await view(planId)).toMatchObject({ status: 7, pauseReason: 'manual' });
    expect((await jobStarts(planId)).n).toBe(0);
    expect(await amounts(ids)).toEqual([0, 0]);

    const resumed = await h.request('POST', `/alterations/${planId}/resume`);
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(202);
    await untilPlan(planId, (p) => p.status === 4, 'to complete');
    expect(await amounts(ids)).toEqual([6, 6]);
  });
});

describe('outside every window', () => {
  /** A window of an hour starting about three hours from now, in UTC. */
  const later = () => {
    const start = Math.ceil((Date.now() + 3 * 3_600_000) / MINUTE) * MINUTE;
    return { start, window: windowOf(start, start + 60 * MINUTE, 'UTC') };
  };

  it('a resume is a 409 naming the next window start; with ignoreSchedule the plan runs to its end', async () => {
    const { ids, filter } = await seed(3);
    const { start, window } = later();
    const planId = await submit({ alterations: setAmount(7), filter, schedule: { windows: [window] } });
    const paused = await untilPlan(planId, pausedBySchedule, 'paused by its schedule');
    expect(paused.resumesAt).toBe(new Date(start).toISOString());
    expect(paused.schedule).toEqual({ windows: [window] });
    expect((await jobStarts(planId)).n).toBe(0);
    // The schedule is part of the plan's body: the same id again is the same plan, another schedule a 409.
    const body = { id: planId, alterations: setAmount(7), filter, schedule: { windows: [window] } };
    expect((await h.request('POST', '/alterations/submit', { body })).body).toEqual({ planId });
    const other = { ...body, schedule: { windows: [{ ...window, to: window.from }] } };
    expect((await h.request('POST', '/alterations/submit', { body: other })).status).toBe(409);

    const refused = await h.request('POST', `/alterations/${planId}/resume`, { body: {} });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain(new Date(start).toISOString());
    expect(refused.body.detail).toContain('ignoreSchedule');
    // A manual pause on top: its reason is manual now, and a resume is still refused outside the window.
    expect((await h.request('POST', `/alterations/${planId}/pause`)).status).toBe(202);
    expect(await view(planId)).toMatchObject({ status: 7, pauseReason: 'manual', resumesAt: null });
    expect((await h.request('POST', `/alterations/${planId}/resume`)).status).toBe(409);
    expect((await h.request('POST', `/alterations/${planId}/resume`, { body: { ignoreSchedule: 'yes' } })).status).toBe(
      400,
    );

    const forced = await h.request('POST', `/alterations/${planId}/resume`, { body: { ignoreSchedule: true } });
    expect(forced.status, JSON.stringify(forced.body)).toBe(202);
    const done = await untilPlan(planId, (p) => p.status === 4, 'to complete');
    expect(done).toMatchObject({ schedule: null, resumesAt: null, pauseReason: null });
    expect(done.jobCounts).toMatchObject({ total: 3, completed: 3 });
    expect(await amounts(ids)).toEqual([7, 7, 7]);
  });

  it('an approved plan then follows its schedule', async () => {
    const { ids, filter } = await seed(2);
    const { start, window } = later();
    const planId = await submit({
      alterations: setAmount(8),
      filter,
      approval: { required: true },
      schedule: { windows: [window] },
    });
    const waiting = await view(planId);
    expect(waiting).toMatchObject({ status: 8, resumesAt: null, schedule: { windows: [window] } });
    const approver = await h.keyWith(['alterations:approve']);
    const approved = await h.request('POST', `/alterations/${planId}/approve`, { key: approver, body: {} });
    expect(approved.status, JSON.stringify(approved.body)).toBe(202);
    const paused = await untilPlan(planId, pausedBySchedule, 'paused by its schedule');
    expect(paused.resumesAt).toBe(new Date(start).toISOString());
    expect(paused.approval).toMatchObject({ state: 'Approved' });
    expect((await jobStarts(planId)).n).toBe(0);
    expect(await amounts(ids)).toEqual([0, 0]);
    expect((await h.request('POST', `/alterations/${planId}/cancel`)).status).toBe(202);
    expect((await view(planId)).status).toBe(6);
  });
});

describe('a window that opens and one that closes during the test: after the boundary', () => {
  it('opens on time: the plan runs by itself and no job started before the window', async () => {
    // The worker goes away and another comes while the plan waits: the timer is the server's.
    if (boundary - Date.now() > 8_000) {
      await h.stopWorker();
      await sleep(3_000);
      expect(await view(opening.planId)).toMatchObject({ status: 7, pauseReason: 'schedule' });
      await h.startWorker();
    }
    const done = await untilPlan(opening.planId, (p) => p.status === 4, 'to complete', boundary - Date.now() + 20_000);
    expect(Date.parse(done.startedAt)).toBeGreaterThanOrEqual(boundary);
    expect(Date.parse(done.completedAt) - boundary).toBeLessThan(10_000);
    const jobs = await jobStarts(opening.planId);
    expect(jobs.n).toBe(3);
    expect(jobs.first).toBeGreaterThanOrEqual(boundary);
    expect(await amounts(opening.ids)).toEqual([1, 1, 1]);
  }, 150_000);

  it('closes on time: no batch starts after it; the plan waits for next week, and ignoreSchedule finishes it', async () => {
    const paused = await untilPlan(closing.planId, pausedBySchedule, 'paused by its schedule', 20_000);
    const nextStart = new Date(closingStart + 7 * DAY).toISOString();
    expect(paused.resumesAt).toBe(nextStart);
    const at = await jobStarts(closing.planId);
    expect(at.n).toBeGreaterThan(0);
    expect(at.n).toBeLessThan(200);
    expect(at.last).toBeLessThan(boundary);
    await sleep(2_000);
    const later = await jobStarts(closing.planId);
    expect(later.n).toBe(at.n);
    expect((await view(closing.planId)).jobCounts.completed).toBe(at.n);

    const refused = await h.request('POST', `/alterations/${closing.planId}/resume`, { body: {} });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain(nextStart);

    expect((await h.request('PATCH', `/alterations/${closing.planId}/rollout`, { body: { rate: 1000 } })).status).toBe(
      200,
    );
    const forced = await h.request('POST', `/alterations/${closing.planId}/resume`, {
      body: { ignoreSchedule: true },
    });
    expect(forced.status, JSON.stringify(forced.body)).toBe(202);
    expect(forced.body.status).toBe(3);
    const done = await untilPlan(closing.planId, (p) => p.status === 4, 'to complete');
    expect(done.jobCounts).toMatchObject({ total: 200, completed: 200, failed: 0 });
    expect(done).toMatchObject({ schedule: null, resumesAt: null });
    expect(new Set(await amounts(closing.ids))).toEqual(new Set([2]));
  }, 60_000);
});
