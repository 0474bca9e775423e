import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planWorkflowId } from '../../src/temporal/names.js';
import { createHarness, type Harness } from '../support/harness.js';
import { payloadJson, runCompletedPlan } from '../support/plans.js';

// A plan's generation and completion run as local activities, and its batches come in whole rounds of the
// window, at least two: a small plan runs smaller batches so that the window stays full to the end.
let h: Harness;
const run = Math.random().toString(36).slice(2, 8);
const planId = `small-${run}`;
const definitionId = `small-def-${run}`;

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 1000, window: 2, batchesPerRun: 500 } });
  await runCompletedPlan(h, { planId, definitionId, count: 2000, value: 7 });
}, 120_000);

afterAll(() => h?.close());

describe('a small plan', () => {
  it('runs two rounds of the window (4 batches of 500) instead of 2 of the configured 1000, every job once', async () => {
    const history = await h.client.workflow.getHandle(planWorkflowId(planId)).fetchHistory();
    const summaries = (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJobBatch')
      .map((e) => payloadJson(e.userMetadata?.summary));
    expect(summaries).toEqual(
      [0, 500, 1000, 1500].map(
        (from) => `jobs ${from.toLocaleString('en')}–${(from + 499).toLocaleString('en')} of 2,000`,
      ),
    );
    const plan = (await h.request('GET', `/alterations/${planId}`)).body.plan;
    expect(plan.jobCounts).toMatchObject({ total: 2000, completed: 2000, failed: 0 });
    const { rows } = await h.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM workflow_instances WHERE definition_id = $1 AND variables->'amount' = '7' AND revision = 1`,
      [definitionId],
    );
    expect(rows[0]!.n).toBe(2000);
  });

  it('generates and completes as local activities, not through the activity queue', async () => {
    const history = await h.client.workflow.getHandle(planWorkflowId(planId)).fetchHistory();
    const events = history.events ?? [];
    const queued = events
      .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
      .filter((name) => name !== undefined);
    expect(new Set(queued)).toEqual(new Set(['runJobBatch']));
    const local = events
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity')
      .map((e) => {
        const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
        return data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }).activity_type : '?';
      });
    expect(local).toEqual(['generateJobs', 'completePlan']);
  });
});
