import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlanWorkflow } from '../../src/temporal/plans.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

let h: Harness;
let versionId: string;
// Plan ids are also Temporal workflow ids, and a Temporal server may outlive one test run.
const run = Math.random().toString(36).slice(2, 8);
const processing = () => ({ taskQueue: h.taskQueue, batchSize: 10, window: 2, batchesPerRun: 5 });

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 10, window: 2, batchesPerRun: 5 } });
  const r = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('failing-def') });
  expect(r.status).toBe(201);
  versionId = r.body.id;
  await seedInstances(h.pool, { definitionVersionId: versionId, count: 5, namePrefix: 'failing-' });
});
afterAll(() => h?.close());

/**
 * A plan row written directly, as an older version or a bypassed validator might have stored it: the API
 * now refuses these values, but processing must still end instead of retrying forever.
 */
async function storePlan(id: string, alterations: unknown, filter: unknown) {
  await h.pool.query(
    `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at)
     VALUES ($1, '', $2::jsonb, $3::jsonb, 'x', 0, now())`,
    [id, JSON.stringify(alterations), JSON.stringify(filter)],
  );
  await startPlanWorkflow(h.client, processing(), id);
}

async function failedPlan(id: string) {
  return eventually(
    async () => {
      const r = await h.request('GET', `/alterations/${id}`);
      return r.body.plan?.status === 5 ? r.body.plan : undefined;
    },
    `plan ${id} to end Failed`,
    30_000,
  );
}

/** How many times Temporal ran each activity type of the plan workflow (scheduled + retried attempts). */
async function attempts(planId: string): Promise<Record<string, number>> {
  const history = await h.client.workflow.getHandle(`alteration-plan-${planId}`).fetchHistory();
  const out: Record<string, number> = {};
  const scheduled = new Map<string, string>();
  for (const e of history.events ?? []) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(e.eventId), s.activityType?.name ?? '?');
    // Generation and completion run as local activities: a marker per step says its attempts.
    const marker = e.markerRecordedEventAttributes;
    const payload =
      marker?.markerName === 'core_local_activity' ? marker.details?.data?.payloads?.[0]?.data : undefined;
    if (payload) {
      const la = JSON.parse(Buffer.from(payload).toString('utf8')) as { activity_type: string; attempt: number };
      out[la.activity_type] = Math.max(out[la.activity_type] ?? 0, la.attempt);
    }
    const started = e.activityTaskStartedEventAttributes;
    if (started) {
      const type = scheduled.get(String(started.scheduledEventId)) ?? '?';
      out[type] = Math.max(out[type] ?? 0, started.attempt ?? 1);
    }
  }
  return out;
}

describe('a plan that fails in SQL', () => {
  it('ends Failed with the reason after one attempt when a stored Migrate target overflows an integer', async () => {
    await storePlan(`overflow-plan-${run}`, [{ type: 'Migrate', targetVersion: 2147483648 }], {
      definitionIds: ['failing-def'],
    });
    const plan = await failedPlan(`overflow-plan-${run}`);
    expect(plan.failureReason).toMatch(/targetVersion/);
    expect(plan.completedAt).not.toBeNull();
    expect((await attempts(`overflow-plan-${run}`)).runJobBatch).toBe(1);
  });

  it('ends Failed with the reason after one attempt when its writes violate a database constraint', async () => {
    // A rule of the database the plan's change breaks: the same failure on every attempt.
    await h.pool.query(
      "ALTER TABLE workflow_instances ADD CONSTRAINT test_amount_small CHECK ((variables->>'amount') IS NULL OR (variables->>'amount')::numeric < 1000) NOT VALID",
    );
    try {
      const r = await h.request('POST', '/alterations/submit', {
        body: {
          id: `constraint-plan-${run}`,
          alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5000 }],
          filter: { searchTerm: 'failing-' },
        },
      });
      expect(r.status).toBe(202);
      const plan = await failedPlan(`constraint-plan-${run}`);
      expect(plan.failureReason).toMatch(/violate a database constraint.*test_amount_small/);
      expect((await attempts(`constraint-plan-${run}`)).runJobBatch).toBe(1);
      const line = h.logs.findLast((l) => l.msg === 'plan activity failed with an error that a retry cannot fix');
      const err = line?.err as { message?: string; stack?: string } | undefined;
      expect(err?.message).toMatch(/test_amount_small/);
      expect(err?.stack).toMatch(/\n\s+at /);
      // Nothing half-written: the failing batch was one transaction.
      const { rows } = await h.pool.query(
        "SELECT count(*)::int AS n FROM workflow_instances WHERE name LIKE 'failing-%' AND variables->>'amount' = '5000'",
      );
      expect(rows[0].n).toBe(0);
    } finally {
      await h.pool.query('ALTER TABLE workflow_instances DROP CONSTRAINT test_amount_small');
    }
  });

  it('ends Failed with the reason when a timestamp filter is outside what Postgres accepts', async () => {
    await storePlan(`year-zero-plan-${run}`, [{ type: 'Cancel' }], {
      timestampFilters: [{ column: 'CreatedAt', operator: 'GreaterThan', timestamp: '0000-01-01T00:00:00Z' }],
    });
    const plan = await failedPlan(`year-zero-plan-${run}`);
    // The stored filter is checked again before it reaches SQL; either way the reason names the problem.
    expect(plan.failureReason).toMatch(/year|cannot be processed by the database/);
    expect((await attempts(`year-zero-plan-${run}`)).generateJobs).toBe(1);
    // Nothing was altered: the failing generation created no job.
    expect(plan.jobCounts.total).toBe(0);
  });

  it('shows no failureReason on a plan that completed', async () => {
    const r = await h.request('POST', '/alterations/submit', {
      body: {
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 3 }],
        filter: { searchTerm: 'failing-' },
      },
    });
    expect(r.status).toBe(202);
    const done = await eventually(async () => {
      const p = (await h.request('GET', `/alterations/${r.body.planId}`)).body.plan;
      return p?.status === 4 ? p : undefined;
    }, 'plan completion');
    expect(done.failureReason).toBeNull();
  });
});

describe('an operator cancelling the plan workflow in Temporal', () => {
  it('does not leave the plan row Running', async () => {
    await seedInstances(h.pool, { definitionVersionId: versionId, count: 300, namePrefix: 'cancel-wf-' });
    await h.stopWorker();
    const r = await h.request('POST', '/alterations/submit', {
      body: {
        id: `temporal-cancel-${run}`,
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 9 }],
        filter: { searchTerm: 'cancel-wf-' },
      },
    });
    expect(r.status).toBe(202);
    await h.client.workflow.getHandle(`alteration-plan-temporal-cancel-${run}`).cancel();
    await h.startWorker();
    const plan = await failedPlan(`temporal-cancel-${run}`);
    expect(plan.failureReason).toBe('The plan workflow was cancelled in Temporal');
  });
});
