import { timestampParts } from '../api/input.js';
import type { Queryable } from '../db/pool.js';
import type { Filter } from './model.js';

/** A filter compiled to a WHERE clause over `workflow_instances i`, with its parameters. */
export interface CompiledFilter {
  /** false when the filter selects nothing (an empty filter without emptyFilterSelectsAll). */
  selects: boolean;
  where: string;
  params: unknown[];
}

const TIMESTAMP_COLUMNS = { CreatedAt: 'i.created_at', UpdatedAt: 'i.updated_at', FinishedAt: 'i.finished_at' } as const;
const OPERATORS = {
  Is: '=',
  IsNot: 'IS DISTINCT FROM',
  LessThan: '<',
  GreaterThan: '>',
  LessThanOrEqual: '<=',
  GreaterThanOrEqual: '>=',
} as const;

const present = <T>(list: readonly T[] | null | undefined): list is readonly T[] => Array.isArray(list) && list.length > 0;

export function escapeLike(term: string): string {
  return term.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}

/**
 * Compiles a filter into one parameterized WHERE clause, always scoped to the tenant (`$1`). Every
 * given field is a constraint, combined with AND; absent, null and [] are no constraint. A filter
 * without any constraint selects nothing unless `emptyFilterSelectsAll` is true, so a typo can never
 * widen a plan to every instance.
 */
export function compileFilter(filter: Filter, tenantKey: string): CompiledFilter {
  const params: unknown[] = [tenantKey];
  const clauses: string[] = [];
  const param = (value: unknown, cast = '') => {
    params.push(value);
    return `$${params.length}${cast}`;
  };
  const inList = (column: string, list: readonly string[] | null | undefined) => {
    if (present(list)) clauses.push(`${column} = ANY(${param([...list], '::text[]')})`);
  };

  inList('i.id', filter.workflowInstanceIds);
  inList('i.correlation_id', filter.correlationIds);
  inList('i.name', filter.names);
  inList('i.definition_id', filter.definitionIds);
  inList('i.definition_version_id', filter.definitionVersionIds);
  inList('i.status', filter.statuses);
  inList('i.sub_status', filter.subStatuses);
  if (typeof filter.searchTerm === 'string' && filter.searchTerm.length > 0) {
    // The search text (id, name, correlation id, definition id and version id) is kept beside the instance.
    clauses.push(
      `i.id IN (SELECT s.instance_id FROM workflow_instance_search s WHERE s.tenant_id = $1 AND s.search ILIKE ${param(`%${escapeLike(filter.searchTerm)}%`)})`,
    );
  }
  if (typeof filter.hasIncidents === 'boolean') clauses.push(filter.hasIncidents ? '(i.incident_count > 0)' : 'NOT (i.incident_count > 0)');
  if (typeof filter.isSystem === 'boolean') clauses.push(`i.is_system = ${param(filter.isSystem)}`);
  if (present(filter.activityFilters)) {
    // One set-based condition, however many entries: the instance's records are joined once against the
    // entries (a null field matches anything) and every entry must have matched one of them. Its cost
    // grows linearly with the entries; one EXISTS per entry made the planner's work explode.
    const entries = filter.activityFilters;
    const column = (pick: (a: (typeof entries)[number]) => string | null | undefined) => param(entries.map((a) => pick(a) ?? null), '::text[]');
    clauses.push(
      `(SELECT count(DISTINCT f.n) FROM activity_records r
          JOIN unnest(${column((a) => a.activityId)}, ${column((a) => a.nodeId)}, ${column((a) => a.name)}, ${column((a) => a.status)})
               WITH ORDINALITY AS f(activity_id, node_id, name, status, n)
            ON (f.activity_id IS NULL OR r.activity_id = f.activity_id) AND (f.node_id IS NULL OR r.node_id = f.node_id)
           AND (f.name IS NULL OR r.name = f.name) AND (f.status IS NULL OR r.status = f.status)
         WHERE r.instance_id = i.id AND r.tenant_id = i.tenant_id) = ${param(entries.length, '::bigint')}`,
    );
  }
  if (present(filter.timestampFilters)) {
    for (const t of filter.timestampFilters) {
      // Postgres parses offsets only up to ±15:59; the contract allows ±18:00, so the offset is applied here.
      const { local, offsetMinutes } = timestampParts(t.timestamp);
      const at = `((${param(local, '::timestamp')} - make_interval(mins => ${param(offsetMinutes, '::int')})) AT TIME ZONE 'UTC')`;
      clauses.push(`${TIMESTAMP_COLUMNS[t.column]} ${OPERATORS[t.operator]} ${at}`);
    }
  }

  const selects = clauses.length > 0 || filter.emptyFilterSelectsAll === true;
  return { selects, where: ['i.tenant_id = $1', ...clauses].join(' AND '), params };
}

/** Dry-run: the ids a filter selects in the tenant, by creation time then id. Creates nothing. */
export async function selectInstanceIds(db: Queryable, filter: Filter, tenantKey: string): Promise<string[]> {
  const compiled = compileFilter(filter, tenantKey);
  if (!compiled.selects) return [];
  const { rows } = await db.query<{ id: string }>({
    text: `SELECT i.id FROM workflow_instances i WHERE ${compiled.where} ORDER BY i.created_at, i.id`,
    values: compiled.params,
    rowMode: 'array',
  } as never);
  return (rows as unknown as [string][]).map((r) => r[0]);
}
