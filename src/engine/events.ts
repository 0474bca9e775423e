import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import type { DefinitionCache } from './definitions.js';
import { runPureSteps, writePureSteps } from './pure-steps.js';
import { scheduleSuccessors, settle } from './transitions.js';
import {
  INSTANCE_COLUMNS,
  instanceFromRow,
  type InstanceRow,
  type InstanceState,
  writeInstanceStates,
} from './instance-state.js';

export interface TriggerFilter {
  correlationId?: string | undefined;
  workflowInstanceId?: string | undefined;
}

export interface TriggerResult {
  resumedWorkflowInstanceIds: string[];
}

/**
 * Resumes every suspended instance of the tenant that has a bookmark on the event: the bookmark is
 * removed, the waiting activity completes and its successors are scheduled, and the pure steps they lead
 * to run (src/engine/pure-steps.ts). All in one transaction, with the rows locked, so a concurrent trigger
 * cannot resume the same bookmark twice; what needs an instance's workflow is told through the outbox
 * that commits with it, so the trigger answers once the resumption is durable, not after it ran.
 */
export async function triggerEvent(
  pool: pg.Pool,
  definitions: DefinitionCache,
  tenantKey: string,
  eventName: string,
  filter: TriggerFilter,
  now = new Date(),
): Promise<TriggerResult> {
  return withTransaction(pool, async (client) => {
    // Rows are locked in id order, as every bulk change does (so two never deadlock); they are resumed and
    // reported in creation order.
    const { rows: locked } = await client.query<{ id: string }>(
      `WITH locked AS (
         SELECT id, created_at FROM workflow_instances
          WHERE tenant_id = $1 AND status = 'Running' AND bookmarks @> $2::jsonb
            AND ($3::text IS NULL OR correlation_id = $3) AND ($4::text IS NULL OR id = $4)
          ORDER BY id
          FOR UPDATE)
       SELECT id FROM locked ORDER BY created_at, id`,
      [tenantKey, JSON.stringify([{ eventName }]), filter.correlationId ?? null, filter.workflowInstanceId ?? null],
    );
    // Resumed a chunk at a time in the one transaction: memory follows the chunk, not the event's audience
    // (10,000 instances resumed at once held every state three times over).
    const resumedIds: string[] = [];
    for (let at = 0; at < locked.length; at += TRIGGER_CHUNK) {
      const ids = locked.slice(at, at + TRIGGER_CHUNK).map((r) => r.id);
      resumedIds.push(...(await resumeChunk(client, definitions, ids, eventName, now)));
    }
    return { resumedWorkflowInstanceIds: resumedIds };
  });
}

/** Instances one statement of a trigger reads and writes. */
const TRIGGER_CHUNK = 1000;

/**
 * Resumes locked instances: the bookmarks on the event are removed, the waiting activities complete and
 * their successors are scheduled, and the pure steps they lead to run (src/engine/pure-steps.ts).
 */
async function resumeChunk(
  client: pg.PoolClient,
  definitions: DefinitionCache,
  ids: string[],
  eventName: string,
  now: Date,
): Promise<string[]> {
  const { rows } = await client.query<InstanceRow>(
    `SELECT ${INSTANCE_COLUMNS} FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY created_at, id`,
    [ids],
  );
  const before = new Map(rows.map((r) => [r.id, instanceFromRow(r)]));
  const resumed: InstanceState[] = [];
  const waiting: { instanceId: string; activityId: string }[] = [];
  for (const row of rows) {
    const s = structuredClone(before.get(row.id)!);
    const def = await definitions.byVersionId(client, s.definitionVersionId);
    if (!def) continue;
    const activityIds = [...new Set(s.bookmarks.filter((b) => b.eventName === eventName).map((b) => b.activityId))];
    s.bookmarks = s.bookmarks.filter((b) => b.eventName !== eventName);
    for (const activityId of activityIds) {
      waiting.push({ instanceId: s.id, activityId });
      scheduleSuccessors(s, def, activityId, 'Done');
    }
    s.updatedAt = now;
    if (s.subStatus === 'Suspended' && s.scheduled.length > 0) s.subStatus = 'Pending';
    settle(s, now);
    resumed.push(s);
  }
  // The waiting Event activities complete, and every resumed instance is written: one statement each.
  if (waiting.length > 0) {
    await client.query(
      `UPDATE activity_records r SET status = 'Completed', completed_at = $3
         FROM unnest($1::text[], $2::text[]) AS w(instance_id, activity_id)
        WHERE r.instance_id = w.instance_id AND r.activity_id = w.activity_id AND r.status = 'Running'`,
      [waiting.map((w) => w.instanceId), waiting.map((w) => w.activityId), now],
    );
  }
  const steps = await runPureSteps(client, definitions, resumed, now);
  await writeInstanceStates(client, resumed, before);
  await writePureSteps(client, steps);
  return resumed.map((s) => s.id);
}
