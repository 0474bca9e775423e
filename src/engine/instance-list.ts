import { escapeLike } from '../db/sql.js';
import { decodePageCursor, encodePageCursor } from '../vocabulary/page-cursor.js';
import type { Queryable } from '../db/pool.js';
import { incidentCondition, type IncidentMatch } from './incident-filter.js';
import type { InstanceStatus, InstanceSubStatus } from './instance-state.js';
import type { InstanceSummary } from './instance-views.js';

export interface InstanceListQuery {
  definitionId?: string | undefined;
  status?: InstanceStatus | undefined;
  subStatus?: InstanceSubStatus | undefined;
  correlationId?: string | undefined;
  /** Case-insensitive substring of id, name, correlation id, definition id or version id; '' is no constraint. */
  searchTerm?: string | undefined;
  /** An incident the instance has (the console's link from an incident group). */
  incident?: IncidentMatch | undefined;
  /** An unsealed cursor from a previous page. */
  after?: string | undefined;
  limit: number;
}

interface SummaryRow {
  id: string;
  /** created_at to the microsecond: the cursor must name the exact position, and Date keeps only ms. */
  position: string;
  /** The item's JSON, as Postgres wrote it. */
  item: string;
}

/** A timestamptz as `Date.toISOString` writes it (UTC, milliseconds, `Z`), or SQL NULL. */
const ISO_MS = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

const POSITION = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const CURSOR_ID = /^[\w.:-]{1,100}$/;

/** A timestamp Postgres accepts: the pattern, years 1–9999, and a real date (no February 30). */
function validPosition(p: string): boolean {
  if (!POSITION.test(p) || p.startsWith('0000')) return false;
  const ms = Date.parse(`${p.slice(0, 23)}Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 23) === p.slice(0, 23);
}

const encodeCursor = (row: SummaryRow) => encodePageCursor('wi', [row.position, row.id]);

const decodeCursor = (cursor: string): [string, string] =>
  decodePageCursor(
    cursor,
    'wi',
    (p): p is [string, string] =>
      p.length === 2 &&
      typeof p[0] === 'string' &&
      validPosition(p[0]) &&
      typeof p[1] === 'string' &&
      CURSOR_ID.test(p[1]),
  );

/**
 * A page of the tenant's instances, newest first (created_at DESC, id DESC), filters combined with AND.
 * searchTerm means what it means in the alteration filter (`%` and `_` are literal); each equality filter
 * has an index that ends in (created_at, id) (migration 006), so a page reads about `limit` rows.
 *
 * Postgres writes each item's JSON (`json_build_object`, the same fields and ISO timestamps as
 * `Date.toISOString`): the page is joined, never parsed and serialized again on the node. A page of 1,000
 * cost the node about 19 ms of its event loop as rows (parsing, Dates, views, `JSON.stringify`), and one
 * tenant reading them 32 at a time made every other tenant's requests 50x slower (attack run, M1).
 */
export async function listInstancesJson(
  db: Queryable,
  tenantKey: string,
  q: InstanceListQuery,
): Promise<{ itemsJson: string; nextCursor: string | null }> {
  const params: unknown[] = [tenantKey];
  const param = (value: unknown, cast: string) => {
    params.push(value);
    return `$${params.length}::${cast}`;
  };
  // Plain equalities, not the alteration filter's `= ANY(list)`: only an equality lets the planner read
  // an index that ends in (created_at, id) in order and stop after one page.
  const clauses = ['i.tenant_id = $1'];
  if (q.definitionId !== undefined) clauses.push(`i.definition_id = ${param(q.definitionId, 'text')}`);
  if (q.status !== undefined) clauses.push(`i.status = ${param(q.status, 'text')}`);
  if (q.subStatus !== undefined) clauses.push(`i.sub_status = ${param(q.subStatus, 'text')}`);
  if (q.correlationId !== undefined) clauses.push(`i.correlation_id = ${param(q.correlationId, 'text')}`);
  if (q.searchTerm) {
    // The alteration filter's search (src/alterations/filter.ts): the trigram-indexed search text.
    clauses.push(
      `i.id IN (SELECT s.instance_id FROM workflow_instance_search s WHERE s.tenant_id = $1 AND s.search ILIKE ${param(`%${escapeLike(q.searchTerm)}%`, 'text')})`,
    );
  }
  if (q.incident !== undefined) clauses.push(incidentCondition([q.incident], (v) => param(v, 'text')));
  if (q.after !== undefined) {
    const [position, id] = decodeCursor(q.after);
    clauses.push(`(i.created_at, i.id) < (${param(position, 'timestamptz')}, ${param(id, 'text')})`);
  }
  const { rows } = await db.query<SummaryRow>(
    `SELECT i.id, to_char(i.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position,
            json_build_object(
              'id', i.id, 'definitionId', i.definition_id, 'version', i.version, 'name', i.name,
              'correlationId', i.correlation_id, 'status', i.status, 'subStatus', i.sub_status,
              'incidentCount', i.incident_count, 'createdAt', ${ISO_MS('i.created_at')},
              'updatedAt', ${ISO_MS('i.updated_at')}, 'finishedAt', ${ISO_MS('i.finished_at')})::text AS item
       FROM workflow_instances i
      WHERE ${clauses.join(' AND ')}
      ORDER BY i.created_at DESC, i.id DESC
      LIMIT ${param(q.limit + 1, 'int')}`,
    params,
  );
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  return {
    itemsJson: `[${page.map((r) => r.item).join(',')}]`,
    nextCursor: more ? encodeCursor(page[page.length - 1]!) : null,
  };
}

/** A page of the tenant's instances as objects (`listInstancesJson`, parsed). */
export async function listInstances(
  db: Queryable,
  tenantKey: string,
  q: InstanceListQuery,
): Promise<{ items: InstanceSummary[]; nextCursor: string | null }> {
  const page = await listInstancesJson(db, tenantKey, q);
  return { items: JSON.parse(page.itemsJson) as InstanceSummary[], nextCursor: page.nextCursor };
}
