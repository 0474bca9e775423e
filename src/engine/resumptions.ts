import { prepared, type Queryable } from '../db/pool.js';

/**
 * The resumption queue (migration 014): an event's delivery to instances, recorded by a trigger that reaches
 * more instances than it resumes inline, and taken by workers (`resumeRecorded` in src/engine/events.ts).
 */

/**
 * Records the event's resumption of these instances (locked by the caller, in the order given: oldest first).
 * Returns the ids recorded now, in that order: an instance whose resumption on this event is recorded already
 * (a trigger before this one, not yet run) is left out.
 */
export async function recordResumptions(
  db: Queryable,
  tenantKey: string,
  eventName: string,
  ids: readonly string[],
): Promise<string[]> {
  const { rows } = await db.query<{ instance_id: string }>(
    `INSERT INTO instance_resumptions (instance_id, event_name, tenant_id)
     SELECT i.id, $2, $3 FROM unnest($1::text[]) WITH ORDINALITY AS i(id, n) ORDER BY i.n
     ON CONFLICT (instance_id, event_name) DO NOTHING
     RETURNING instance_id`,
    [ids, eventName, tenantKey],
  );
  const recorded = new Set(rows.map((r) => r.instance_id));
  return ids.filter((id) => recorded.has(id));
}

/** Which of these instances have a resumption on the event recorded and not yet run. */
export async function recordedResumptions(
  db: Queryable,
  ids: readonly string[],
  eventName: string,
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ instance_id: string }>(
    'SELECT instance_id FROM instance_resumptions WHERE instance_id = ANY($1::text[]) AND event_name = $2',
    [ids, eventName],
  );
  return new Set(rows.map((r) => r.instance_id));
}

export interface ClaimedResumption {
  instance_id: string;
  event_name: string;
}

/**
 * Claims up to `max` recorded resumptions for the caller's transaction, oldest first within a tenant and an
 * even part of `max` per tenant with resumptions waiting (so one tenant's hundred thousand never hold another's
 * one behind them for more than a pass). Rows another transaction holds are skipped (several workers drain the
 * queue at once). The rows are locked, not deleted: the caller locks their instances first, then deletes them
 * (`forgetResumptions`), in the order every trigger takes (instance rows, then queue rows), so a trigger that
 * records while a worker runs never waits on the worker's deletes while holding the instances it wants.
 */
export async function claimResumptions(db: Queryable, max: number): Promise<ClaimedResumption[]> {
  const { rows } = await db.query<ClaimedResumption>(
    `WITH RECURSIVE tenants AS (
       (SELECT tenant_id FROM instance_resumptions ORDER BY tenant_id LIMIT 1)
       UNION ALL
       SELECT (SELECT r.tenant_id FROM instance_resumptions r WHERE r.tenant_id > t.tenant_id
                ORDER BY r.tenant_id LIMIT 1)
         FROM tenants t WHERE t.tenant_id IS NOT NULL),
     waiting AS (SELECT tenant_id FROM tenants WHERE tenant_id IS NOT NULL)
     SELECT p.instance_id, p.event_name FROM waiting w CROSS JOIN LATERAL (
       SELECT r.instance_id, r.event_name, r.seq FROM instance_resumptions r
        WHERE r.tenant_id = w.tenant_id
        ORDER BY r.seq
        LIMIT greatest(1, ceil($1::numeric / (SELECT count(*) FROM waiting)))::int
        FOR UPDATE SKIP LOCKED) p
     ORDER BY p.seq`,
    [max],
  );
  return rows;
}

/**
 * Whether any resumption is recorded: an idle drain's look, one statement outside a transaction (the claim's
 * BEGIN, statement and COMMIT are three round trips, ten times a second on every worker).
 */
export async function resumptionsRecorded(db: Queryable): Promise<boolean> {
  // By the tenants' index, as the claim reads it: not every page of a table a large drain just emptied.
  const { rowCount } = await db.query(prepared('SELECT 1 FROM instance_resumptions ORDER BY tenant_id LIMIT 1', []));
  return (rowCount ?? 0) > 0;
}

/** Deletes claimed resumptions (in the claiming transaction, once their instances are locked). */
export async function forgetResumptions(db: Queryable, claimed: readonly ClaimedResumption[]): Promise<void> {
  await db.query(
    `DELETE FROM instance_resumptions r
      USING unnest($1::text[], $2::text[]) AS c(instance_id, event_name)
      WHERE r.instance_id = c.instance_id AND r.event_name = c.event_name`,
    [claimed.map((c) => c.instance_id), claimed.map((c) => c.event_name)],
  );
}
