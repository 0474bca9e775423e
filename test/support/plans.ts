import { expect } from 'vitest';
import { eventually, type Harness } from './harness.js';
import { seedInstances } from './seed.js';
import { approvalWithNote } from './workflows.js';

/**
 * A definition of its own with `count` instances (amount 0), and plan `planId` setting their `amount` to
 * `value`, run to Completed.
 */
export async function runCompletedPlan(
  h: Harness,
  o: { planId: string; definitionId: string; count: number; value: number },
): Promise<void> {
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote(o.definitionId) });
  await seedInstances(h.pool, { definitionVersionId: def.body.id, count: o.count, variables: { amount: 0 } });
  const r = await h.request('POST', '/alterations/submit', {
    body: {
      id: o.planId,
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: o.value }],
      filter: { definitionIds: [o.definitionId] },
    },
  });
  expect(r.status).toBe(202);
  await eventually(
    async () => ((await h.request('GET', `/alterations/${o.planId}`)).body.plan?.status === 4 ? true : undefined),
    'the plan to complete',
  );
}

/** A payload of the SDK's JSON converter (a summary, a marker's details), as the Temporal UI decodes it. */
export const payloadJson = (payload: { data?: Uint8Array | null } | null | undefined) =>
  payload?.data ? JSON.parse(Buffer.from(payload.data).toString('utf8')) : undefined;

/** The activity types of a history's local activities (their `core_local_activity` markers), in order. */
export const localActivities = (
  events: readonly {
    markerRecordedEventAttributes?: {
      markerName?: string | null;
      details?: { [key: string]: { payloads?: ({ data?: Uint8Array | null } | null)[] | null } | null } | null;
    } | null;
  }[],
): string[] =>
  events.flatMap((e) =>
    e.markerRecordedEventAttributes?.markerName === 'core_local_activity'
      ? [
          (payloadJson(e.markerRecordedEventAttributes.details?.data?.payloads?.[0]) as { activity_type?: string })
            ?.activity_type ?? '',
        ]
      : [],
  );

type HistoryEvents = NonNullable<
  Awaited<ReturnType<ReturnType<Harness['client']['workflow']['getHandle']>['fetchHistory']>>['events']
>;

/**
 * A workflow's history once `recorded` holds for it. What a workflow task's local activities did shows in Postgres
 * while the task runs; their markers reach the history only when the task completes, which a busy worker may do
 * a moment later: a test that read the history as soon as Postgres showed the outcome could miss them.
 */
export const recordedHistory = (
  h: Harness,
  workflowId: string,
  recorded: (events: HistoryEvents) => boolean,
  what: string,
): Promise<HistoryEvents> =>
  eventually(async () => {
    const { events } = await h.client.workflow.getHandle(workflowId).fetchHistory();
    return events && recorded(events) ? events : undefined;
  }, what);

/** The results of a history's local activities (their markers' `result` payloads, as JSON), in order. */
export const localResults = (events: HistoryEvents): unknown[] =>
  events.flatMap((e) =>
    e.markerRecordedEventAttributes?.markerName === 'core_local_activity'
      ? [payloadJson(e.markerRecordedEventAttributes.details?.result?.payloads?.[0])]
      : [],
  );
