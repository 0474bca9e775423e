import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepRetention } from '../../src/alterations/retention.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * Retention (contract section 13) on real Postgres: what is past its days goes, with what belongs to it, and what
 * is inside its days stays; a purged plan says so (404) and cannot be reverted (409); the audit trail loses its
 * oldest entries and still verifies. Ages are set by SQL; the sweep runs as a worker runs it.
 */
let h: Harness;
let versionId: string;
const run = randomBytes(3).toString('hex');
const SETTINGS = { planDays: 90, instanceDays: 30, auditDays: 400, sweepSeconds: 600 };

beforeAll(async () => {
  h = await createHarness();
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote(`retention-${run}`) });
  expect(def.status, JSON.stringify(def.body)).toBe(201);
  versionId = def.body.id;
});
afterAll(async () => {
  await h?.close();
});

async function completedPlan(id: string, instances: string[]) {
  const r = await h.request('POST', '/alterations/submit', {
    body: {
      id,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }],
      filter: { workflowInstanceIds: instances },
    },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  await eventually(
    async () => ((await h.request('GET', `/alterations/${id}`)).body.plan?.status === 4 ? true : undefined),
    `plan ${id} to complete`,
  );
}

/**
 * Moves a plan's jobs and sets `days` back (the week's partition made for them), as if generated then; the name of
 * the week's partition.
 */
async function generatedDaysAgo(planId: string, days: number): Promise<string> {
  const { rows } = await h.pool.query<{ name: string }>(
    'SELECT wfa_job_partition(now() - make_interval(days => $1)) AS name',
    [days],
  );
  for (const table of ['alteration_job_sets', 'alteration_jobs'])
    await h.pool.query(`UPDATE ${table} SET created_at = created_at - make_interval(days => $2) WHERE plan_id = $1`, [
      planId,
      days,
    ]);
  return rows[0]!.name;
}

const count = async (sql: string, params: unknown[]) => Number((await h.pool.query(sql, params)).rows[0].n);

describe('retention', () => {
  it("purges a finished plan past its days, its jobs with their week's partition; keeps one inside them; says so for the purged one", async () => {
    const instances = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 6,
      variables: { amount: 0 },
    });
    await completedPlan(`old-${run}`, instances.slice(0, 3));
    await completedPlan(`new-${run}`, instances.slice(3));
    const week = await generatedDaysAgo(`old-${run}`, 100);
    await h.pool.query("UPDATE alteration_plans SET completed_at = now() - interval '91 days' WHERE id = $1", [
      `old-${run}`,
    ]);
    const purged = await sweepRetention(h.pool, SETTINGS);
    expect(purged).toMatchObject({ plans: 1, jobs: 3 });
    // The week went whole: its table is gone, not emptied row by row.
    expect((await h.pool.query('SELECT to_regclass($1) AS t', [week])).rows[0].t).toBeNull();
    expect(await count('SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = $1', [`old-${run}`])).toBe(0);
    expect(await count('SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = $1', [`new-${run}`])).toBe(3);
    // Its id names that plan for good, in every tenant.
    const again = await h.request('POST', '/alterations/submit', {
      body: { id: `old-${run}`, alterations: [{ type: 'Cancel' }], filter: { workflowInstanceIds: instances } },
    });
    expect(again.status, JSON.stringify(again.body)).toBe(409);
    const gone = await h.request('GET', `/alterations/old-${run}`);
    expect(gone.status).toBe(404);
    expect(gone.body.detail).toBe('This plan was purged after 90 days');
    expect((await h.request('GET', `/alterations/old-${run}/jobs`)).body.detail).toBe(
      'This plan was purged after 90 days',
    );
    const revert = await h.request('POST', `/alterations/old-${run}/revert`, { body: {} });
    expect(revert.status).toBe(409);
    expect(revert.body.detail).toMatch(/was purged after 90 days .*nothing is left to revert/);
    expect((await h.request('GET', `/alterations/new-${run}`)).body.plan.jobCounts.completed).toBe(3);
    // Nothing more to do: a second sweep removes nothing.
    expect(await sweepRetention(h.pool, SETTINGS)).toEqual({ plans: 0, jobs: 0, instances: 0, auditEntries: 0 });
  });

  it('keeps a plan that a kept revert names until the revert goes too', async () => {
    const instances = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 2,
      variables: { amount: 0 },
    });
    await completedPlan(`orig-${run}`, instances);
    const r = await h.request('POST', `/alterations/orig-${run}/revert`, { body: { id: `undo-${run}` } });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    await eventually(
      async () => ((await h.request('GET', `/alterations/undo-${run}`)).body.plan?.status === 4 ? true : undefined),
      'the revert to complete',
    );
    await h.pool.query("UPDATE alteration_plans SET completed_at = now() - interval '100 days' WHERE id = $1", [
      `orig-${run}`,
    ]);
    expect((await sweepRetention(h.pool, SETTINGS)).plans).toBe(0);
    await h.pool.query("UPDATE alteration_plans SET completed_at = now() - interval '95 days' WHERE id = $1", [
      `undo-${run}`,
    ]);
    expect((await sweepRetention(h.pool, SETTINGS)).plans).toBe(2);
    expect((await h.request('GET', `/alterations/orig-${run}`)).status).toBe(404);
  });

  it("deletes a purged plan's rows from a week a kept plan holds, once that week is past its grace, and keeps the kept plan's", async () => {
    const instances = await seedInstances(h.pool, {
      definitionVersionId: versionId,
      count: 4,
      variables: { amount: 0 },
    });
    await completedPlan(`gone-${run}`, instances.slice(0, 2));
    await completedPlan(`held-${run}`, instances.slice(2));
    const week = await generatedDaysAgo(`gone-${run}`, 150);
    expect(await generatedDaysAgo(`held-${run}`, 150)).toBe(week);
    // The one finished long ago goes; the other (generated then, finished lately, as a long plan would) holds the week.
    await h.pool.query("UPDATE alteration_plans SET completed_at = now() - interval '91 days' WHERE id = $1", [
      `gone-${run}`,
    ]);
    expect(await sweepRetention(h.pool, SETTINGS)).toMatchObject({ plans: 1, jobs: 2 });
    expect((await h.pool.query('SELECT to_regclass($1) AS t', [week])).rows[0].t).not.toBeNull();
    expect(await count('SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = $1', [`gone-${run}`])).toBe(0);
    expect(await count('SELECT count(*) AS n FROM alteration_jobs WHERE plan_id = $1', [`held-${run}`])).toBe(2);
    expect((await h.request('GET', `/alterations/held-${run}/jobs`)).body.items).toHaveLength(2);
    // Once the kept one goes too, the week goes whole.
    await h.pool.query("UPDATE alteration_plans SET completed_at = now() - interval '91 days' WHERE id = $1", [
      `held-${run}`,
    ]);
    expect(await sweepRetention(h.pool, SETTINGS)).toMatchObject({ plans: 1, jobs: 2 });
    expect((await h.pool.query('SELECT to_regclass($1) AS t', [week])).rows[0].t).toBeNull();
  });

  it('purges finished instances past INSTANCE_RETENTION_DAYS with their records, and keeps running ones', async () => {
    const [finished, running] = await seedInstances(h.pool, { definitionVersionId: versionId, count: 2 });
    await h.pool.query(
      "UPDATE workflow_instances SET status = 'Finished', sub_status = 'Finished', finished_at = now() - interval '31 days' WHERE id = $1",
      [finished],
    );
    const purged = await sweepRetention(h.pool, SETTINGS);
    expect(purged.instances).toBe(1);
    expect(await count('SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1)', [[finished, running]])).toBe(
      1,
    );
    expect((await h.request('GET', `/workflow-instances/${running}`)).status).toBe(200);
    // Without the setting, instances stay.
    expect((await sweepRetention(h.pool, { ...SETTINGS, instanceDays: undefined })).instances).toBe(0);
  });

  it("removes the audit trail's oldest entries past their days, and the chain still verifies from the oldest kept", async () => {
    const before = await h.request('GET', '/audit/verify');
    expect(before.body.ok).toBe(true);
    const total = before.body.checked as number;
    // The first five entries of the default tenant made old, as only a superuser can (the trigger refuses UPDATE).
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SET LOCAL session_replication_role = 'replica'");
      await client.query("UPDATE audit_entries SET at = now() - interval '401 days' WHERE tenant_id = '' AND seq <= 5");
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    // Their hashes no longer match (the time is in them): the chain is broken at the first.
    expect((await h.request('GET', '/audit/verify')).body.firstBrokenSeq).toBe(1);
    expect((await sweepRetention(h.pool, SETTINGS)).auditEntries).toBe(5);
    const after = await h.request('GET', '/audit/verify');
    expect(after.body).toMatchObject({ ok: true, firstBrokenSeq: null });
    expect(after.body.checked).toBeGreaterThanOrEqual(total - 5);
    const { rows } = await h.pool.query("SELECT min(seq) AS s FROM audit_entries WHERE tenant_id = ''");
    expect(Number(rows[0].s)).toBe(6);
  });
});
