import type { Queryable } from '../db/pool.js';
import { decodePageCursor, encodePageCursor } from '../vocabulary/page-cursor.js';
import type { IncidentGroup } from './instance-views.js';
import { OUTBOUND_ACTIVITY_TYPE } from './instance-state.js';

/** How much of an incident's message makes its group: longer messages differ only in their tails. */
export const GROUP_MESSAGE_LENGTH = 200;
/** Instances named in each group, the latest to fault first. */
const SAMPLES = 5;

interface GroupRow {
  definition_id: string;
  version: number;
  activity_id: string;
  activity_type: string;
  message: string;
  count: number;
  first_at: string;
  last_at: string;
  samples: string[];
}

type Position = [count: number, definitionId: string, version: number, activityId: string, message: string];

const encodeCursor = (r: GroupRow) =>
  encodePageCursor('ig', [r.count, r.definition_id, r.version, r.activity_id, r.message] satisfies Position);

const decodeCursor = (cursor: string): Position =>
  decodePageCursor(
    cursor,
    'ig',
    (p): p is Position =>
      p.length === 5 &&
      Number.isInteger(p[0]) &&
      typeof p[1] === 'string' &&
      Number.isInteger(p[2]) &&
      typeof p[3] === 'string' &&
      typeof p[4] === 'string',
  );

/**
 * The tenant's open incidents grouped by definition, version, activity and message (its first 200 characters),
 * largest group first: one statement over the instances that have incidents (their own index), whatever the
 * tenant's size. `count` is the number of instances in the group; the samples are the latest to fault.
 */
export async function listIncidentGroups(
  db: Queryable,
  tenantKey: string,
  q: { definitionId?: string | undefined; after?: string | undefined; limit: number },
): Promise<{ items: IncidentGroup[]; nextCursor: string | null }> {
  const params: unknown[] = [tenantKey, GROUP_MESSAGE_LENGTH, SAMPLES, q.limit + 1];
  const param = (v: unknown) => `$${params.push(v)}`;
  const definition = q.definitionId === undefined ? '' : `AND i.definition_id = ${param(q.definitionId)}`;
  let after = '';
  if (q.after !== undefined) {
    const [count, definitionId, version, activityId, message] = decodeCursor(q.after);
    after = `WHERE g.count < ${param(count)}
                OR (g.count = $${params.length} AND (g.definition_id, g.version, g.activity_id, g.message)
                    > (${param(definitionId)}::text, ${param(version)}::int, ${param(activityId)}::text, ${param(message)}::text))`;
  }
  const { rows } = await db.query<GroupRow>(
    `WITH incidents AS (
       SELECT i.id, i.definition_id, i.version, e->>'activityId' AS activity_id, e->>'activityType' AS activity_type,
              left(e->>'message', $2) AS message, e->>'timestamp' AS at
         FROM workflow_instances i CROSS JOIN LATERAL jsonb_array_elements(i.incidents) e
        WHERE i.tenant_id = $1 AND (i.incident_count > 0) ${definition}
     ), g AS (
       SELECT definition_id, version, activity_id, min(activity_type) AS activity_type, message,
              count(DISTINCT id)::int AS count, min(at) AS first_at, max(at) AS last_at,
              (array_agg(id ORDER BY at DESC, id))[1:$3] AS samples
         FROM incidents GROUP BY definition_id, version, activity_id, message
     )
     SELECT * FROM g ${after}
      ORDER BY g.count DESC, g.definition_id, g.version, g.activity_id, g.message
      LIMIT $4`,
    params,
  );
  const page = rows.slice(0, q.limit);
  return {
    items: page.map((r) => ({
      definitionId: r.definition_id,
      version: r.version,
      activityId: r.activity_id,
      activityType: r.activity_type,
      message: r.message,
      count: r.count,
      firstAt: r.first_at,
      lastAt: r.last_at,
      sampleInstanceIds: [...new Set(r.samples)],
    })),
    nextCursor: rows.length > q.limit ? encodeCursor(page[page.length - 1]!) : null,
  };
}

/** What a version's unfinished instances do at one activity. */
export interface ActivityCount {
  activityId: string;
  type: string;
  name: string | null;
  /** Instances waiting on it (a bookmark). */
  waiting: number;
  /** Instances that have it scheduled, or its outbound call out now (its record Running, by the records' index). */
  scheduled: number;
  /** Instances with an incident on it. */
  faulted: number;
}

/**
 * How many of a version's unfinished instances wait on each of its activities, have it scheduled (an outbound
 * call that is out counts as scheduled: started, not ended), or have an incident on it: one pass over the
 * version's running instances. Every activity of the version is listed (in
 * the definition's order), zeros included.
 */
export async function activityCounts(
  db: Queryable,
  tenantKey: string,
  versionId: string,
  activities: readonly { id: string; type: string; name?: string | undefined }[],
): Promise<ActivityCount[]> {
  // Instances at the same place hold equal bookmark and schedule arrays: the running instances are grouped by
  // those arrays (a hash of each row's two values, no array taken apart per row), and only the few groups are
  // taken apart. Incidents are read from the instances that have some (their own index).
  const { rows } = await db.query<{ kind: 'w' | 's' | 'f'; activity_id: string; n: number }>(
    `WITH places AS (
       SELECT i.bookmarks, i.scheduled, count(*)::int AS n
         FROM workflow_instances i
        WHERE i.tenant_id = $1 AND i.definition_version_id = $2 AND i.status = 'Running'
        GROUP BY i.bookmarks, i.scheduled
     )
     SELECT 'w' AS kind, a.activity_id, sum(p.n)::int AS n
       FROM places p CROSS JOIN LATERAL (SELECT DISTINCT b->>'activityId' AS activity_id FROM jsonb_array_elements(p.bookmarks) b) a
      GROUP BY a.activity_id
     UNION ALL
     SELECT 's', a.activity_id, sum(p.n)::int
       FROM places p CROSS JOIN LATERAL (SELECT DISTINCT s AS activity_id FROM jsonb_array_elements_text(p.scheduled) s) a
      GROUP BY a.activity_id
     UNION ALL
     SELECT 's', r.activity_id, count(DISTINCT i.id)::int
       FROM activity_records r JOIN workflow_instances i ON i.id = r.instance_id
      WHERE r.tenant_id = $1 AND r.activity_id = ANY($3::text[]) AND r.status = 'Running'
        AND i.definition_version_id = $2 AND i.status = 'Running' AND NOT (i.scheduled ? r.activity_id)
      GROUP BY r.activity_id
     UNION ALL
     SELECT 'f', e.activity_id, count(DISTINCT i.id)::int
       FROM workflow_instances i CROSS JOIN LATERAL (SELECT e->>'activityId' AS activity_id FROM jsonb_array_elements(i.incidents) e) e
      WHERE i.tenant_id = $1 AND (i.incident_count > 0) AND i.definition_version_id = $2 AND i.status = 'Running'
      GROUP BY e.activity_id`,
    [tenantKey, versionId, activities.filter((a) => a.type === OUTBOUND_ACTIVITY_TYPE).map((a) => a.id)],
  );
  const counts = new Map<string, ActivityCount>();
  for (const a of activities)
    if (!counts.has(a.id))
      counts.set(a.id, { activityId: a.id, type: a.type, name: a.name ?? null, waiting: 0, scheduled: 0, faulted: 0 });
  const field = { w: 'waiting', s: 'scheduled', f: 'faulted' } as const;
  for (const r of rows) {
    const c = counts.get(r.activity_id);
    if (c) c[field[r.kind]] += r.n;
  }
  return [...counts.values()];
}

/** How many of the tenant's unfinished instances of one definition are in one sub-status. */
export interface UnfinishedCount {
  definitionId: string;
  subStatus: string;
  count: number;
}

/** The tenant's unfinished instances, counted per definition and sub-status (one pass over its Running ones). */
export async function unfinishedCounts(db: Queryable, tenantKey: string): Promise<UnfinishedCount[]> {
  const { rows } = await db.query<{ definition_id: string; sub_status: string; count: number }>(
    `SELECT definition_id, sub_status, count(*)::int AS count FROM workflow_instances
      WHERE tenant_id = $1 AND status = 'Running' GROUP BY definition_id, sub_status ORDER BY definition_id, sub_status`,
    [tenantKey],
  );
  return rows.map((r) => ({ definitionId: r.definition_id, subStatus: r.sub_status, count: r.count }));
}
