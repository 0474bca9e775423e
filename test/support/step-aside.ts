import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { expect, inject } from 'vitest';
import { PLAN_STATUS } from '../../src/alterations/model.js';
import { eventually, type Harness } from './harness.js';
import { seedInstances } from './seed.js';
import { approvalWithNote } from './workflows.js';

/**
 * Another tenant that keeps starting plans, for the tests of a batch stepping aside (src/alterations/step-aside.ts):
 * one plan row of `tenantId`, Dispatching, its start kept fresh every 20 ms until `stop` (which also ends it). A
 * batch steps aside only for a plan that started after its own plan did: one that starts soon after the plan under
 * test does meets a start newer than its plan's.
 */
export async function keepStarting(h: Harness, tenantId: string): Promise<{ id: string; stop: () => Promise<void> }> {
  const id = randomUUID();
  await h.pool.query(
    `INSERT INTO alteration_plans (id, tenant_id, alterations, filter, request_hash, status, created_at, started_at)
     VALUES ($1, $2, '[]', '{}', 'step-aside', $3, now(), now())`,
    [id, tenantId, PLAN_STATUS.Dispatching],
  );
  const fresh = setInterval(
    () => void h.pool.query('UPDATE alteration_plans SET started_at = now() WHERE id = $1', [id]).catch(() => {}),
    20,
  );
  return {
    id,
    stop: async () => {
      clearInterval(fresh);
      await h.pool.query('UPDATE alteration_plans SET status = $2 WHERE id = $1', [id, PLAN_STATUS.Cancelled]);
    },
  };
}

/**
 * A plan of one ModifyVariable (`amount` to 5) over `count` new instances of the tenant, submitted and waited
 * for until it completes (within `timeoutMs`): its id and its view.
 */
export async function planToCompletion(h: Harness, tenantId: string, count: number, timeoutMs?: number) {
  const key = await h.keyWith(['*'], tenantId);
  const def = await h.request('POST', '/workflow-definitions', { key, body: approvalWithNote(tenantId) });
  await seedInstances(h.pool, { definitionVersionId: def.body.id, count, tenantId });
  const r = await h.request('POST', '/alterations/submit', {
    key,
    body: {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
      filter: { definitionIds: [tenantId] },
    },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  const planId = r.body.planId as string;
  const plan = await eventually(
    async () => {
      const v = await h.request('GET', `/alterations/${planId}`, { key });
      return v.body.plan.status === PLAN_STATUS.Completed ? v.body.plan : undefined;
    },
    'the plan to complete',
    timeoutMs,
  );
  return { planId, plan };
}

const decode = (p: { data?: Uint8Array | null } | undefined) =>
  JSON.parse(Buffer.from(p!.data!).toString('utf8')) as Record<string, unknown>;

/**
 * One run of a plan's workflow, replayed (it must replay as it ran): each batch that came back, in order, with
 * whether it stepped aside, and the run it continued from (undefined for the first).
 */
export async function batchesOfRun(h: Harness, planId: string, runId?: string) {
  const history = await h.client.workflow.getHandle(`alteration-plan-${planId}`, runId).fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history);
  const scheduled = new Map<string, number>();
  const batches: { fromOrd: number; steppedAside: boolean }[] = [];
  let previousRunId: string | undefined;
  for (const e of history.events ?? []) {
    const started = e.workflowExecutionStartedEventAttributes;
    if (started?.continuedExecutionRunId) previousRunId = started.continuedExecutionRunId;
    const a = e.activityTaskScheduledEventAttributes;
    if (a?.activityType?.name === 'runJobBatch')
      scheduled.set(String(e.eventId), decode(a.input!.payloads![0]!).fromOrd as number);
    const c = e.activityTaskCompletedEventAttributes;
    const fromOrd = c ? scheduled.get(String(c.scheduledEventId)) : undefined;
    if (fromOrd !== undefined) batches.push({ fromOrd, steppedAside: !!decode(c!.result!.payloads![0]!).steppedAside });
  }
  return { batches, previousRunId };
}
