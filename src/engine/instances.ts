import { noteAudit } from '../audit/scope.js';
import type pg from 'pg';
import { prepared, type Queryable } from '../db/pool.js';
import { NotFoundError, pointer, ValidationError, type FieldError } from '../errors.js';
import { newId } from '../ids.js';
import { findDefinition, type DefinitionCache } from './definitions.js';
import { insertPureJournalSql, insertPureRecordsSql, runPureSteps } from './pure-steps.js';
import { startActivityId } from './flowchart.js';
import { INSTANCE_COLUMNS, instanceFromRow, type InstanceRow, type InstanceState } from './instance-state.js';
import type { ActivityRecordStatus, InstanceView } from './instance-views.js';
import { convertValue, isVariableType } from './values.js';

export interface CreateInstanceRequest {
  definitionId: string;
  version?: number | undefined;
  name?: string | undefined;
  correlationId?: string | undefined;
  variables?: Record<string, unknown> | undefined;
}

/**
 * Stores a new instance of a definition (Running/Pending, its start activity scheduled). Variables
 * start at the definition's defaults; given values are converted to the variable's type. Its pure steps
 * run first, in memory, up to its first wait or external call (src/engine/pure-steps.ts): the instance is
 * stored as they left it, with their records and journal, in one statement, and the outbox row that tells its
 * workflow (migration 011) commits with it.
 */
export async function createInstance(
  pool: pg.Pool,
  definitions: DefinitionCache,
  tenantKey: string,
  req: CreateInstanceRequest,
  now = new Date(),
): Promise<string> {
  const def = await findDefinition(pool, tenantKey, req.definitionId, req.version);
  if (!def) {
    const which = req.version === undefined ? '' : ` with version ${req.version}`;
    throw new ValidationError(`Workflow definition ${req.definitionId}${which} not found`, [
      {
        path: req.version === undefined ? '/definitionId' : '/version',
        message: `Workflow definition ${req.definitionId}${which} not found`,
      },
    ]);
  }
  const variables: Record<string, unknown> = {};
  for (const v of def.variables) {
    if (v.value !== undefined && isVariableType(v.typeName)) {
      const c = convertValue(v.typeName, v.value);
      variables[v.id] = c.ok ? c.value : null;
    }
  }
  const errors: FieldError[] = [];
  for (const [id, value] of Object.entries(req.variables ?? {})) {
    const v = def.variables.find((d) => d.id === id);
    if (!v || !isVariableType(v.typeName)) {
      errors.push({
        path: pointer(['variables', id]),
        message: `Variable with ID ${id} not found in ${def.definitionId} version ${def.version}`,
      });
      continue;
    }
    const c = convertValue(v.typeName, value);
    if (!c.ok)
      errors.push({
        path: pointer(['variables', id]),
        message: `Value is not a valid ${v.typeName} for variable ${id}`,
      });
    else variables[id] = c.value;
  }
  if (errors.length) throw new ValidationError('The instance variables are not valid', errors);

  const id = newId();
  noteAudit({ targetId: id });
  const start = startActivityId(def.root);
  const s: InstanceState = {
    id,
    tenantKey,
    definitionId: def.definitionId,
    definitionVersionId: def.id,
    version: def.version,
    name: req.name ?? null,
    correlationId: req.correlationId ?? null,
    isSystem: false,
    status: 'Running',
    subStatus: 'Pending',
    variables,
    scheduled: start ? [start] : [],
    bookmarks: [],
    incidents: [],
    createdAt: now,
    updatedAt: now,
    finishedAt: null,
    revision: 0,
  };
  // The instance, its pure steps' records and journal lines in one statement: atomic without a transaction's
  // BEGIN and COMMIT round trips. (A new instance has no records of before for a Finish among them to close.)
  const steps = await runPureSteps(pool, definitions, [s], now);
  await pool.query(
    prepared(
      `WITH instance AS (
         INSERT INTO workflow_instances
           (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
            variables, scheduled, bookmarks, incidents, created_at, updated_at, finished_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16)
         RETURNING id),
       records AS (${insertPureRecordsSql('$17')}),
       journal AS (${insertPureJournalSql('$18')})
       SELECT id FROM instance`,
      [
        id,
        tenantKey,
        def.definitionId,
        def.id,
        def.version,
        s.name,
        s.correlationId,
        s.status,
        s.subStatus,
        JSON.stringify(s.variables),
        JSON.stringify(s.scheduled),
        JSON.stringify(s.bookmarks),
        JSON.stringify(s.incidents),
        now,
        s.updatedAt,
        s.finishedAt,
        JSON.stringify(steps.records),
        JSON.stringify(steps.journal),
      ],
    ),
  );
  return id;
}

/** The full read model of one instance in the tenant; 404 when it is absent or another tenant's. */
export async function getInstanceView(
  db: Queryable,
  definitions: DefinitionCache,
  tenantKey: string,
  id: string,
): Promise<InstanceView> {
  const { rows } = await db.query<InstanceRow>(
    `SELECT ${INSTANCE_COLUMNS} FROM workflow_instances WHERE id = $1 AND tenant_id = $2`,
    [id, tenantKey],
  );
  if (!rows[0]) throw new NotFoundError(`Workflow instance ${id} not found`);
  const s = instanceFromRow(rows[0]);
  const def = await definitions.byVersionId(db, s.definitionVersionId);
  // One after the other: an API request holds at most one connection at a time (its tenant's share).
  const records = await db.query<{
    activity_id: string;
    node_id: string;
    activity_type: string;
    name: string | null;
    status: ActivityRecordStatus;
    inputs: Record<string, unknown>;
    started_at: Date;
    completed_at: Date | null;
  }>(
    `SELECT activity_id, node_id, activity_type, name, status, inputs, started_at, completed_at
       FROM activity_records WHERE instance_id = $1 ORDER BY id`,
    [id],
  );
  const journal = await db.query<{ activity_id: string; message: string; timestamp: Date }>(
    'SELECT activity_id, message, timestamp FROM journal_entries WHERE instance_id = $1 ORDER BY id',
    [id],
  );
  const declared = def?.variables ?? [];
  const variables: InstanceView['variables'] = declared.map((v) => ({
    id: v.id,
    name: v.name ?? v.id,
    typeName: v.typeName,
    value: s.variables[v.id] ?? null,
  }));
  // Values kept for variables that the current version no longer declares (after a migration) stay visible.
  for (const [vid, value] of Object.entries(s.variables)) {
    if (!declared.some((v) => v.id === vid)) variables.push({ id: vid, name: vid, typeName: 'Object', value });
  }
  return {
    id: s.id,
    definitionId: s.definitionId,
    definitionVersionId: s.definitionVersionId,
    version: s.version,
    name: s.name,
    correlationId: s.correlationId,
    status: s.status,
    subStatus: s.subStatus,
    isSystem: s.isSystem,
    incidentCount: s.incidents.length,
    incidents: s.incidents,
    variables,
    scheduledActivityIds: s.scheduled,
    bookmarks: s.bookmarks,
    activityRecords: records.rows.map((r) => ({
      activityId: r.activity_id,
      nodeId: r.node_id,
      activityType: r.activity_type,
      name: r.name,
      status: r.status,
      inputs: r.inputs,
      startedAt: r.started_at.toISOString(),
      completedAt: r.completed_at?.toISOString() ?? null,
    })),
    journal: journal.rows.map((j) => ({
      activityId: j.activity_id,
      message: j.message,
      timestamp: j.timestamp.toISOString(),
    })),
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
    finishedAt: s.finishedAt?.toISOString() ?? null,
  };
}

/**
 * The retention purge of instances: removes up to `batch` of those that finished more than `days` ago, with their
 * records and journal (ON DELETE CASCADE). Returns how many.
 */
export async function purgeFinishedInstances(db: Queryable, days: number, batch: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM workflow_instances WHERE id = ANY(ARRAY(
       SELECT id FROM workflow_instances
        WHERE status = 'Finished' AND finished_at < now() - make_interval(days => $1) LIMIT $2))`,
    [days, batch],
  );
  return rowCount ?? 0;
}
