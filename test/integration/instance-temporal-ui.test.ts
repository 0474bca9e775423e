import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceWorkflowId } from '../../src/temporal/names.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { approvalWithNote } from '../support/workflows.js';

let h: Harness;
const definitionId = `ui-instance-${Math.random().toString(36).slice(2, 8)}`;

beforeAll(async () => {
  h = await createHarness();
  expect((await h.request('POST', '/workflow-definitions', { body: approvalWithNote(definitionId) })).status).toBe(201);
});
afterAll(() => h?.close());

const listed = async (query: string) => {
  const ids: string[] = [];
  for await (const w of h.client.workflow.list({ query })) ids.push(w.workflowId);
  return ids;
};

describe('an instance execution in Temporal', () => {
  it('says where it left the instance: search attributes, memo, current details and result', async () => {
    const id = (await h.request('POST', '/workflow-instances', { body: { definitionId } })).body
      .workflowInstanceId as string;
    const workflowId = instanceWorkflowId(id);
    await eventually(
      async () =>
        (await h.request('GET', `/workflow-instances/${id}`)).body.subStatus === 'Suspended' ? true : undefined,
      'suspension',
    );
    const handle = h.client.workflow.getHandle(workflowId);
    expect(await handle.result()).toEqual({
      instance: 'Running/Suspended',
      summary: 'ran `start`, `wait`; suspended at `wait`, waiting on approve (wait)',
      executedActivityIds: ['start', 'wait'],
    });
    const found = await eventually(async () => {
      const ids = await listed(
        `WorkflowInstanceStatus = "Running/Suspended" AND WorkflowDefinitionId = "${definitionId}" AND AlterationTenant = "default"`,
      );
      return ids.includes(workflowId) ? ids : undefined;
    }, 'the suspended instance by its attributes');
    expect(found).toContain(workflowId);
    const description = await handle.describe();
    expect(description.memo).toEqual({ instanceId: id, definitionId, version: 1, tenant: 'default' });
    expect(await description.staticSummary()).toBe(
      `Execution of workflow instance ${id}: runs its scheduled activities until it suspends or ends`,
    );
    const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toBe(
      '**Running/Suspended** · ran `start`, `wait`; suspended at `wait`, waiting on approve (wait)',
    );

    // The event resumes it: a new run under the same id, which ends with the instance.
    await h.request('POST', '/events/approve/trigger', { body: { workflowInstanceId: id } });
    await eventually(
      async () => ((await h.request('GET', `/workflow-instances/${id}`)).body.status === 'Finished' ? true : undefined),
      'the end',
    );
    const second = h.client.workflow.getHandle(workflowId);
    expect(await second.result()).toMatchObject({ instance: 'Finished/Finished', executedActivityIds: ['done'] });
    await eventually(
      async () =>
        (
          await listed(`WorkflowInstanceStatus = "Finished/Finished" AND WorkflowDefinitionId = "${definitionId}"`)
        ).includes(workflowId)
          ? true
          : undefined,
      'the finished instance by its attributes',
    );
  });
});
