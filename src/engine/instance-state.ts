import { prepared, type Queryable } from '../db/pool.js';
import { sameJson } from '../vocabulary/json.js';

export const INSTANCE_STATUSES = ['Running', 'Finished'] as const;
export const INSTANCE_SUB_STATUSES = ['Pending', 'Executing', 'Suspended', 'Finished', 'Cancelled', 'Faulted'] as const;
export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];
export type InstanceSubStatus = (typeof INSTANCE_SUB_STATUSES)[number];

export interface Bookmark {
  activityId: string;
  eventName: string;
}

export interface MovedActivity {
  from: string;
  to: string;
  /** Of `to` in the target version. */
  nodeId: string;
  activityType: string;
  name: string | null;
}

export interface Incident {
  activityId: string;
  activityType: string;
  message: string;
  timestamp: string;
}

/** What alterations read and write of an instance: an alteration batch reads only these columns. */
export interface AlterableState {
  id: string;
  tenantKey: string;
  definitionId: string;
  definitionVersionId: string;
  version: number;
  status: InstanceStatus;
  subStatus: InstanceSubStatus;
  variables: Record<string, unknown>;
  scheduled: string[];
  bookmarks: Bookmark[];
  incidents: Incident[];
  updatedAt: Date;
  finishedAt: Date | null;
  /** Writes of this instance so far: every write adds one (a revert compares it, src/alterations/undo.ts). */
  revision: number;
  /**
   * The activities whose outbound call a step started and whose outcome is not recorded yet (their records
   * Running; src/engine/executor.ts makes a call in parts): live work, so the instance does not finish while
   * one is out (`settle`). Read only where a change may settle the instance (`callsInFlightSql`); absent
   * elsewhere, and never written: the activity records are the truth.
   */
  callsInFlight?: readonly string[];
  /**
   * Activities a change carried to another id (a Migrate's activity mappings): the Running record of `from`
   * ends Canceled at the change and one of `to` starts Running with its inputs, written with the instance
   * (`writeRecordChanges`), so a revert reopens the first and closes the second. Never read from the database.
   */
  movedActivities?: readonly MovedActivity[];
}

/** The mutable part of a workflow instance: what execution reads and writes. */
export interface InstanceState extends AlterableState {
  name: string | null;
  correlationId: string | null;
  isSystem: boolean;
  createdAt: Date;
}

export interface InstanceRow {
  id: string;
  tenant_id: string;
  definition_id: string;
  definition_version_id: string;
  version: number;
  name: string | null;
  correlation_id: string | null;
  status: InstanceStatus;
  sub_status: InstanceSubStatus;
  is_system: boolean;
  variables: Record<string, unknown>;
  scheduled: string[];
  bookmarks: Bookmark[];
  incidents: Incident[];
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  revision: number;
  /** With `callsInFlightSql` among the columns read. */
  calls_in_flight?: string[];
}

export const INSTANCE_COLUMNS =
  'id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status, is_system, variables, scheduled, bookmarks, incidents, created_at, updated_at, finished_at, revision';

/** The columns of `AlterableState` (see `alterableFromRow`). */
export const ALTERABLE_COLUMNS =
  'id, tenant_id, definition_id, definition_version_id, version, status, sub_status, variables, scheduled, bookmarks, incidents, updated_at, finished_at, revision';

export type AlterableRow = Omit<InstanceRow, 'name' | 'correlation_id' | 'is_system' | 'created_at'>;

export function alterableFromRow(r: AlterableRow): AlterableState {
  return {
    id: r.id,
    tenantKey: r.tenant_id,
    definitionId: r.definition_id,
    definitionVersionId: r.definition_version_id,
    version: r.version,
    status: r.status,
    subStatus: r.sub_status,
    variables: r.variables,
    scheduled: r.scheduled,
    bookmarks: r.bookmarks,
    incidents: r.incidents,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
    revision: r.revision,
    ...(r.calls_in_flight ? { callsInFlight: r.calls_in_flight } : {}),
  };
}

export function instanceFromRow(r: InstanceRow): InstanceState {
  return {
    ...alterableFromRow(r),
    name: r.name,
    correlationId: r.correlation_id,
    isSystem: r.is_system,
    createdAt: r.created_at,
  };
}

/**
 * `callsInFlight` as a column (`calls_in_flight`) of the workflow_instances row `table` (its name or alias):
 * one probe of the records' (instance_id, id) index per instance read.
 */
export const callsInFlightSql = (table: string) =>
  `ARRAY(SELECT r.activity_id FROM activity_records r
          WHERE r.instance_id = ${table}.id AND r.status = 'Running' AND r.activity_type = '${OUTBOUND_ACTIVITY_TYPE}'
          ORDER BY r.id) AS calls_in_flight`;

/** Reads and row-locks one instance (inside a transaction), with its calls in flight; undefined when it does not exist. */
export async function lockInstance(
  client: Queryable,
  id: string,
  tenantKey?: string,
): Promise<InstanceState | undefined> {
  const { rows } = await client.query<InstanceRow>(
    prepared(
      `SELECT ${INSTANCE_COLUMNS}, ${callsInFlightSql('workflow_instances')} FROM workflow_instances
        WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2) FOR UPDATE`,
      [id, tenantKey ?? null],
    ),
  );
  return rows[0] ? instanceFromRow(rows[0]) : undefined;
}

/**
 * `lockInstance`, and in the same round trip the activity record `recordId` of that instance row-locked too,
 * in the order every writer of both takes them: the instance first (the materialized CTE locks its row before
 * the outer query's subquery locks the record's). No instance: no record either (records go with it).
 */
export async function lockInstanceAndRecord(
  client: Queryable,
  id: string,
  recordId: string,
  /**
   * A delivery's claim on the record's call (activities/calls.ts), given back in the same statement: the call it
   * was taken for has ended. Claims that lapsed an hour ago go with it, as when a delivery gives its claim back,
   * but only those no other transaction holds: this one keeps the rows it deletes locked until it commits (after
   * the instance's and the record's locks, taken first), and another finish must not wait for them.
   */
  claim?: string,
): Promise<{ s: InstanceState | undefined; recordStatus: string | undefined }> {
  const { rows } = await client.query<InstanceRow & { record_status: string | null }>(
    prepared(
      `WITH i AS MATERIALIZED (
         SELECT ${INSTANCE_COLUMNS}, ${callsInFlightSql('workflow_instances')} FROM workflow_instances
          WHERE id = $1 FOR UPDATE)${
            claim === undefined
              ? ''
              : `, given_back AS (
         DELETE FROM outbound_calls_out
          WHERE (record_id = $4 AND claim = $3)
             OR ctid = ANY (ARRAY(SELECT ctid FROM outbound_calls_out
                                   WHERE out_until < now() - interval '1 hour' FOR UPDATE SKIP LOCKED)))`
          }
       SELECT i.*, (SELECT r.status FROM activity_records r WHERE r.id = $2 AND r.instance_id = i.id FOR UPDATE) AS record_status
         FROM i`,
      // The record's id a second time, as the claim's text key ($2 is the record's bigint id).
      claim === undefined ? [id, recordId] : [id, recordId, claim, recordId],
    ),
  );
  const row = rows[0];
  return { s: row ? instanceFromRow(row) : undefined, recordStatus: row?.record_status ?? undefined };
}

/** Writes back the mutable state of one instance. */
export async function saveInstance(client: Queryable, s: InstanceState): Promise<void> {
  await writeInstanceStates(client, [s]);
}

/**
 * An instance has work a worker can run now: the condition for dispatching it. The same rule in SQL is
 * `runnableWorkSql` below; a test checks that both agree on the same rows.
 */
export function hasRunnableWork(s: AlterableState): boolean {
  return s.status === 'Running' && s.subStatus !== 'Faulted' && s.scheduled.length > 0;
}

/** `hasRunnableWork` as a SQL condition on the workflow_instances row aliased `alias`. */
export const runnableWorkSql = (alias: string) =>
  `(${alias}.status = 'Running' AND ${alias}.sub_status <> 'Faulted' AND jsonb_array_length(${alias}.scheduled) > 0)`;

/** The activity type whose steps call out, in parts (src/engine/executor.ts). */
export const OUTBOUND_ACTIVITY_TYPE = 'Elsa.Http.SendHttpRequest';

/**
 * What an instance's workflow has to run, as the outbox relay tells it (`hasWork`): runnable work, or an
 * outbound call a step started and whose outcome was never recorded. The workflow that ran that step makes the
 * call; but when its workflow task was lost after the step committed (a worker killed, a task timed out), the
 * next attempt replays to the word it was told, and a word that said "nothing to run" would leave the call
 * unmade and the instance Executing for ever. Told there is work, the workflow runs the step again, which finds
 * the started call and makes it with the same Idempotency-Key.
 */
export const workflowWorkSql = (alias: string) =>
  `(${runnableWorkSql(alias)} OR (${alias}.status = 'Running' AND ${alias}.sub_status <> 'Faulted' AND EXISTS (
     SELECT 1 FROM activity_records r
      WHERE r.instance_id = ${alias}.id AND r.status = 'Running' AND r.activity_type = '${OUTBOUND_ACTIVITY_TYPE}')))`;

/**
 * The mutable columns of an instance: how to read each from the state (to compare it, and to write it: a
 * Date goes into the JSON rows as its ISO text) and its SQL type.
 */
const WRITABLE: { column: string; type: string; get: (s: AlterableState) => unknown }[] = [
  { column: 'definition_version_id', type: 'text', get: (s) => s.definitionVersionId },
  { column: 'version', type: 'int', get: (s) => s.version },
  { column: 'status', type: 'text', get: (s) => s.status },
  { column: 'sub_status', type: 'text', get: (s) => s.subStatus },
  { column: 'variables', type: 'jsonb', get: (s) => s.variables },
  { column: 'scheduled', type: 'jsonb', get: (s) => s.scheduled },
  { column: 'bookmarks', type: 'jsonb', get: (s) => s.bookmarks },
  { column: 'incidents', type: 'jsonb', get: (s) => s.incidents },
  { column: 'updated_at', type: 'timestamptz', get: (s) => s.updatedAt },
  { column: 'finished_at', type: 'timestamptz', get: (s) => s.finishedAt },
];

/**
 * Writes many instance states in one statement. Given their states as read (`before`), only the columns
 * some instance changed are set: a batch of ModifyVariable writes variables and updated_at, nothing else.
 *
 * `guard`: the states were read without a row lock (a plan's batch, src/alterations/processing.ts), so a
 * row is written only where it still has the revision it was read with. Answers how many rows were written;
 * fewer than `states.length` means another transaction changed one since, and the caller, which must then
 * roll back, runs again with the rows locked.
 */
export async function writeInstanceStates(
  db: Queryable,
  states: readonly AlterableState[],
  before?: ReadonlyMap<string, AlterableState>,
  guard = false,
): Promise<number> {
  if (states.length === 0) return 0;
  const changed = (c: (typeof WRITABLE)[number]) =>
    states.some((s) => {
      const b = before?.get(s.id);
      return !b || !sameJson(c.get(b), c.get(s));
    });
  const columns = WRITABLE.filter((c) => !before || c.column === 'updated_at' || changed(c));
  // The rows travel as one JSON document (one parse in Postgres, no array-literal escaping in node).
  // Guarded, in id order: the order the row locks are taken in, as `lockInstances` takes them.
  const ordered = guard ? [...states].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)) : states;
  const rows = ordered.map((s) => {
    const row: Record<string, unknown> = { id: s.id };
    if (guard) row.revision = before?.get(s.id)?.revision ?? s.revision;
    for (const c of columns) row[c.column] = c.get(s);
    return row;
  });
  // One row as `jsonb_to_record`: the planner counts on one row from it and finds it by the primary key. It counts
  // on 100 from `jsonb_to_recordset` whatever the document holds, and for one row in a table of a few thousand
  // instances it chose to read the whole table (a hash join): most of a step's write-back.
  const one = rows.length === 1;
  const text = `UPDATE workflow_instances w SET revision = w.revision + 1, ${columns.map((c) => `${c.column} = u.${c.column}`).join(', ')}
       FROM ${one ? 'jsonb_to_record' : 'jsonb_to_recordset'}($1::jsonb) AS u(id text, ${guard ? 'revision int8, ' : ''}${columns.map((c) => `${c.column} ${c.type}`).join(', ')})
      WHERE w.id = u.id${guard ? ' AND w.revision = u.revision' : ''}`;
  const values = [JSON.stringify(one ? rows[0] : rows)];
  // Named only in the one shape a step writes (every column, unguarded): the others vary with the columns changed.
  const result = await db.query(!before && !guard ? prepared(text, values) : { text, values });
  return result.rowCount ?? 0;
}
