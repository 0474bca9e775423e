import type pg from 'pg';
import { withTransaction } from '../db/pool.js';
import type { DefinitionCache } from './definitions.js';
import { scheduleSuccessors, settle } from './executor.js';
import { INSTANCE_COLUMNS, instanceFromRow, type InstanceRow, saveInstance } from './instance-state.js';

export interface TriggerFilter {
  correlationId?: string | undefined;
  workflowInstanceId?: string | undefined;
}

export interface TriggerResult {
  resumedWorkflowInstanceIds: string[];
  /** Resumed instances that now have work to run: the caller dispatches these. */
  toDispatch: string[];
}

/**
 * Resumes every suspended instance of the tenant that has a bookmark on the event: the bookmark is
 * removed, the waiting activity completes and its successors are scheduled. All in one transaction,
 * with the rows locked, so a concurrent trigger cannot resume the same bookmark twice.
 */
export async function triggerEvent(
  pool: pg.Pool,
  definitions: DefinitionCache,
  tenantId: string,
  eventName: string,
  filter: TriggerFilter,
  now = new Date(),
): Promise<TriggerResult> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<InstanceRow>(
      `SELECT ${INSTANCE_COLUMNS} FROM workflow_instances
        WHERE tenant_id = $1 AND status = 'Running' AND bookmarks @> $2::jsonb
          AND ($3::text IS NULL OR correlation_id = $3) AND ($4::text IS NULL OR id = $4)
        ORDER BY id
        FOR UPDATE`,
      [tenantId, JSON.stringify([{ eventName }]), filter.correlationId ?? null, filter.workflowInstanceId ?? null],
    );
    const resumed: string[] = [];
    const toDispatch: string[] = [];
    // Rows are locked in id order, as every bulk change does (so two never deadlock); resumed in creation order.
    rows.sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const row of rows) {
      const s = instanceFromRow(row);
      const def = await definitions.byVersionId(client, s.definitionVersionId);
      if (!def) continue;
      const hit = s.bookmarks.filter((b) => b.eventName === eventName);
      s.bookmarks = s.bookmarks.filter((b) => b.eventName !== eventName);
      const activityIds = [...new Set(hit.map((b) => b.activityId))];
      await client.query(
        `UPDATE activity_records SET status = 'Completed', completed_at = $3
          WHERE instance_id = $1 AND activity_id = ANY($2::text[]) AND status = 'Running'`,
        [s.id, activityIds, now],
      );
      for (const activityId of activityIds) scheduleSuccessors(s, def, activityId, 'Done');
      s.updatedAt = now;
      if (s.subStatus === 'Suspended' && s.scheduled.length > 0) s.subStatus = 'Pending';
      settle(s, now);
      await saveInstance(client, s);
      resumed.push(s.id);
      if (s.status === 'Running' && s.subStatus !== 'Faulted' && s.scheduled.length > 0) toDispatch.push(s.id);
    }
    return { resumedWorkflowInstanceIds: resumed, toDispatch };
  });
}
