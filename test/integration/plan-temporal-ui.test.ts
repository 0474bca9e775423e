import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planWorkflowId } from '../../src/temporal/names.js';
import { progressQuery } from '../../workflows/alteration-plan.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { payloadJson, runCompletedPlan } from '../support/plans.js';

let h: Harness;
const run = Math.random().toString(36).slice(2, 8);
const planId = `ui-${run}`;
const definitionId = `ui-def-${run}`;

beforeAll(async () => {
  h = await createHarness({ alterations: { batchSize: 100, window: 2, batchesPerRun: 500 } });
  await runCompletedPlan(h, { planId, definitionId, count: 250, value: 3 });
}, 120_000);

afterAll(() => h?.close());

describe('a plan in Temporal', () => {
  it('is found by its search attributes, kept current to Completed', async () => {
    const found = await eventually(async () => {
      const ids: string[] = [];
      for await (const w of h.client.workflow.list({
        query: `AlterationPlanStatus = "Completed" AND AlterationTenant = "default" AND AlterationTypes = "ModifyVariable"`,
      })) {
        ids.push(w.workflowId);
      }
      return ids.includes(planWorkflowId(planId)) ? ids : undefined;
    }, 'the plan in a search by its attributes');
    expect(found).toContain(planWorkflowId(planId));
    const running: string[] = [];
    for await (const w of h.client.workflow.list({ query: `AlterationPlanStatus = "Running"` }))
      running.push(w.workflowId);
    expect(running).not.toContain(planWorkflowId(planId));
  });

  it('says what it does, shows live counts, answers the progress query and returns the job counts', async () => {
    const handle = h.client.workflow.getHandle(planWorkflowId(planId));
    const description = await handle.describe();
    expect(await description.staticSummary()).toBe(`ModifyVariable amount on instances of ${definitionId}`);
    expect(await description.staticDetails()).toContain(`\`${planId}\``);

    expect(await handle.result()).toMatchObject({
      status: 'Completed',
      total: 250,
      completed: 250,
      failed: 0,
      batchesDone: 3,
      batches: 3,
    });
    expect(await handle.query(progressQuery)).toMatchObject({ status: 'Completed', total: 250, completed: 250 });
    const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toBe('**Completed** · 250 jobs done of 250 (100%) · 0 failed · batch 3 of 3');
  });

  it('names the job range of each batch activity', async () => {
    const history = await h.client.workflow.getHandle(planWorkflowId(planId)).fetchHistory();
    const summaries = (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJobBatch')
      .map((e) => payloadJson(e.userMetadata?.summary));
    expect(summaries).toEqual(['jobs 0–99 of 250', 'jobs 100–199 of 250', 'jobs 200–249 of 250']);
  });
});
