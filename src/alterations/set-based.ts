import type pg from 'pg';
import type { DefinitionCache } from '../engine/definitions.js';
import type { AlterableState } from '../engine/instance-state.js';
import { JOB_STATUS, type Alteration } from './model.js';
import { NO_JOB_WRITTEN, setOrdsInRange } from './plans.js';
import { specOf } from './types/index.js';
import type { ResolvedDefinitions } from './types/spec.js';
import { variablePath } from './undo.js';
import { TimeSlice } from '../vocabulary/time-slice.js';

/**
 * A plan batch in one statement, for plans whose alterations only set variables (`setsVariablesOnly`, a
 * ModifyVariable): what such a plan does to an instance depends on its definition version alone, so node works
 * it out once per version (by the types' own `apply`) and Postgres applies it to the batch's instances, writes
 * their jobs with their before-images and the batch's counts, without the instances travelling to node and back.
 *
 * It writes what the batch in node writes (src/alterations/processing.ts `processBatch`; the differential test
 * test/integration/set-based-batches.test.ts holds the two side by side): the instance's variables, `updated_at`
 * and revision, each job Completed with no log and the before-image `undoImage` makes (`/updatedAt` at the
 * millisecond as node reads it, then each variable whose value differs, in key order). It takes only the batches
 * where nothing else could happen: every instance found once, of a version whose outcome is known and a success,
 * not Finished, with nothing scheduled (the batch in node would run its pure steps), its variables an object, and
 * values a JSON scalar (node and Postgres agree on their equality). Any other batch writes nothing here and runs in node, in the same
 * transaction. It locks the batch's instances in id order, as a batch in node writes them (so that batches over
 * the same instances never deadlock: an UPDATE alone takes its rows in whatever order its plan reads them), and
 * reads each as last committed, after waiting for a transaction that is writing it.
 *
 * One difference, in the service's favour: stored numbers stay as stored, where the batch in node reads them into
 * JavaScript's numbers: the variables the plan does not set (a stored 12345678901234567891 is written back as
 * 12345678901234567000 there) and the before-images (a stored 1.00000000000000000001 set to 1 is a change here and
 * kept exactly, none there; a stored 1e400 is kept, null there).
 */

/** Whether every alteration of the plan may run set-based. */
export const setsVariablesOnly = (alterations: readonly Alteration[]): boolean =>
  alterations.length > 0 && alterations.every((a) => specOf(a).setsVariablesOnly === true);

/**
 * The definition versions a plan's batches met, by plan (this process's, least recently used dropped first):
 * a batch works out the outcomes of the versions the plan met so far. The plan's first batch in this process
 * reads its instances' versions first (`versionsOf`); a later one that meets others learns them from its
 * statement, which then runs again once.
 */
const MAX_PLANS = 256;
const versionsByPlan = new Map<string, Set<string>>();

/** Adds the versions to those the plan met. */
export function rememberVersions(planId: string, versionIds: Iterable<string>): void {
  let seen = versionsByPlan.get(planId);
  if (seen) versionsByPlan.delete(planId);
  else seen = new Set();
  for (const id of versionIds) seen.add(id);
  versionsByPlan.set(planId, seen);
  if (versionsByPlan.size > MAX_PLANS) versionsByPlan.delete(versionsByPlan.keys().next().value!);
}

/** The versions the plan met so far in this process (undefined: none yet), as a copy. */
export function metVersions(planId: string): Set<string> | undefined {
  const seen = versionsByPlan.get(planId);
  return seen && new Set(seen);
}

/**
 * The definition versions of the tenant's instances among the plan's jobs with ord in [fromOrd, toOrd), read
 * without a lock: what the plan's first batch works out before its statement, which would otherwise lock its
 * instances only to name the versions it was not given, and run again. A version that changes meanwhile is met by
 * the statement as any other.
 */
export async function versionsOf(
  client: pg.PoolClient,
  b: { planId: string; tenantId: string; fromOrd: number; toOrd: number },
): Promise<string[]> {
  const { rows } = await client.query<{ v: string }>(
    `SELECT DISTINCT definition_version_id AS v FROM workflow_instances
      WHERE tenant_id = $4 AND id IN (SELECT m.instance_id ${setOrdsInRange('$2', '$3')})`,
    [b.planId, b.fromOrd, b.toOrd, b.tenantId],
  );
  return rows.map((r) => r.v);
}

/** One variable the alterations set: its name, its before-image pointer and the value. */
type PatchEntry = [key: string, path: string, value: string | number | boolean | null];

const isScalar = (v: unknown): v is PatchEntry[2] =>
  v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

/**
 * What the plan's alterations do to an instance of this version, by the types' own `apply` on an instance
 * that holds only its version and no variables: the variables set, in key order (as `undoImage` orders them), or
 * undefined when an alteration fails there or sets a value that is not a JSON scalar. The instance throws when
 * `apply` reads anything else of it: a type marked `setsVariablesOnly` that did would not run set-based unnoticed.
 */
async function outcomeFor(
  alterations: readonly Alteration[],
  versionId: string,
  defs: ResolvedDefinitions,
  slice: TimeSlice,
): Promise<PatchEntry[] | undefined> {
  // Without a prototype: a variable named `__proto__` is a key like any other, as in the instance node reads.
  const variables: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const held: Record<string, unknown> = { id: '(set-based)', definitionVersionId: versionId, variables };
  const instance = new Proxy(held, {
    get(target, key) {
      if (typeof key === 'string' && Object.hasOwn(target, key)) return target[key];
      throw new Error(`An alteration marked setsVariablesOnly read the instance's ${String(key)}`);
    },
  }) as unknown as AlterableState;
  // A plan may carry some 28,000 alterations (a 1 MiB body) and meet many versions: the loop lets the event loop
  // turn when its slice is spent, as the batch in node does between alterations.
  for (const a of alterations) {
    if (specOf(a).apply(instance, a, defs) !== undefined) return undefined;
    await slice.yield();
  }
  const entries: PatchEntry[] = [];
  for (const key of Object.keys(variables).sort()) {
    const value = variables[key];
    if (!isScalar(value)) return undefined;
    entries.push([key, variablePath(key), value]);
  }
  return entries;
}

/** The outcomes of the versions the plan met so far that succeed, by version id (empty: none known). */
export async function versionOutcomes(
  db: pg.PoolClient,
  definitions: DefinitionCache,
  planId: string,
  alterations: readonly Alteration[],
  slice: TimeSlice = new TimeSlice(),
): Promise<Map<string, PatchEntry[]>> {
  const outcomes = new Map<string, PatchEntry[]>();
  const seen = versionsByPlan.get(planId);
  if (!seen) return outcomes;
  const defs: ResolvedDefinitions = { byId: new Map(), byVersion: new Map() };
  for (const id of seen) {
    const def = await definitions.byVersionId(db, id);
    if (def) defs.byId.set(id, def);
  }
  for (const id of defs.byId.keys()) {
    const entries = await outcomeFor(alterations, id, defs, slice);
    if (entries) outcomes.set(id, entries);
  }
  return outcomes;
}

export interface SetBasedBatch {
  planId: string;
  tenantId: string;
  /** The batch's range of ords: its jobs are read from the plan's frozen set by the statement itself. */
  fromOrd: number;
  toOrd: number;
  /** When the batch started, and its time (the jobs' and the instances'). */
  started: Date;
  now: Date;
  outcomes: ReadonlyMap<string, PatchEntry[]>;
  recordUndo: boolean;
  /** What each job's `verification` is written with: Pending for a plan with `verify`, else null. */
  verification: number | null;
}

export interface SetBasedResult {
  /** The range's jobs the statement found: 0 when a job of the range has a row already (see below). */
  jobs: number;
  taken: boolean;
  written: number;
  unmet: string[];
}

/**
 * The batch in one statement, its jobs read from the plan's frozen set in the statement (not sent by node), and
 * only when no job of the range has a row yet (`jobs` 0 otherwise: a retried attempt that finds its jobs written, or
 * Pending rows written before job sets, which the batch in node reads and replaces). `taken`: false when the batch
 * is not one it takes (nothing written, its instances left locked for the batch in node; `unmet`, the versions of
 * its instances without an outcome given); else `written` instances were updated, one per job.
 */
export async function runSetBased(client: pg.PoolClient, b: SetBasedBatch): Promise<SetBasedResult> {
  const { rows } = await client.query<SetBasedResult>(
    `WITH j AS MATERIALIZED (
       SELECT o.ord, m.instance_id, s.created_at ${setOrdsInRange('$2', '$3')} AND ${NO_JOB_WRITTEN('$2', '$3')}
     ), ids AS (
       -- The range as arrays in id order: an instance's job is at its place among the ids (no join of the jobs with
       -- the instances, whose plan the estimate of an unanalyzed set could make a nested loop over both).
       SELECT coalesce(array_agg(instance_id ORDER BY instance_id), '{}') AS ids, array_agg(ord ORDER BY instance_id) AS ords,
              array_agg(created_at ORDER BY instance_id) AS made, count(*)::int AS n, count(DISTINCT instance_id)::int AS d
         FROM j
     ), v AS (
       SELECT e.key AS version_id, e.value AS entries,
              (SELECT jsonb_object_agg(p->>0, p->2) FROM jsonb_array_elements(e.value) AS p) AS patch
         FROM jsonb_each($6::jsonb) AS e
     ), locked AS (
       SELECT w.id, w.revision, w.variables, w.updated_at, w.status, w.scheduled, w.definition_version_id,
              v.entries, v.patch
         FROM workflow_instances w LEFT JOIN v ON v.version_id = w.definition_version_id
        WHERE w.tenant_id = $7::text AND w.id = ANY((SELECT ids FROM ids)::text[])
        ORDER BY w.id FOR NO KEY UPDATE OF w
     ), o AS (
       SELECT locked.*, row_number() OVER (ORDER BY locked.id)::int AS k FROM locked
     ), chk AS (
       SELECT count(*) FILTER (WHERE o.patch IS NOT NULL AND o.status <> 'Finished' AND jsonb_array_length(o.scheduled) = 0
                                 AND jsonb_typeof(o.variables) = 'object')
                = (SELECT n FROM ids)
              AND (SELECT n = d AND n > 0 FROM ids) AS taken
         FROM o
     ), upd AS (
       -- The rows locked above, by their ids once more (one index scan, as a raw UPDATE by ids), each with its
       -- version's patch (every one has one when the batch is taken).
       UPDATE workflow_instances w SET revision = w.revision + 1, variables = w.variables || v.patch, updated_at = $5::timestamptz
         FROM v WHERE w.tenant_id = $7::text AND w.id = ANY((SELECT ids FROM ids)::text[]) AND v.version_id = w.definition_version_id
          AND (SELECT taken FROM chk)
       RETURNING w.id
     ), ins AS (
       INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at, started_at, completed_at, undo, revision, verification)
       SELECT $1::text, i.ords[o.k], wfa_job_id($1::text, i.made[o.k], i.ords[o.k]), o.id, $8::smallint,
              i.made[o.k], $4::timestamptz, $5::timestamptz,
              CASE WHEN $9::boolean THEN
                CASE WHEN date_trunc('milliseconds', o.updated_at) = $5::timestamptz THEN '[]'::jsonb
                     ELSE jsonb_build_array(jsonb_build_array('/updatedAt',
                            to_char(o.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) END
                || coalesce((SELECT jsonb_agg(CASE WHEN o.variables ? (p->>0) THEN jsonb_build_array(p->>1, o.variables->(p->>0))
                                                   ELSE jsonb_build_array(p->>1) END ORDER BY n)
                               FROM jsonb_array_elements(o.entries) WITH ORDINALITY AS x(p, n)
                              WHERE NOT (o.variables ? (p->>0) AND o.variables->(p->>0) = p->2)), '[]'::jsonb)
              END,
              CASE WHEN $9::boolean THEN o.revision + 1 END, $10::smallint
         FROM o CROSS JOIN ids i WHERE (SELECT taken FROM chk)
     ), counted AS (
       INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed)
       SELECT $1::text, $2::int, (SELECT n FROM ids), 0 WHERE (SELECT taken FROM chk)
       ON CONFLICT (plan_id, from_ord) DO UPDATE SET completed = alteration_batch_counts.completed + EXCLUDED.completed
     )
     SELECT (SELECT n FROM ids) AS jobs, (SELECT taken FROM chk) AS taken, (SELECT count(*) FROM upd)::int AS written,
            ARRAY(SELECT DISTINCT definition_version_id FROM o WHERE patch IS NULL) AS unmet`,
    [
      b.planId,
      b.fromOrd,
      b.toOrd,
      b.started,
      b.now,
      JSON.stringify(Object.fromEntries(b.outcomes)),
      b.tenantId,
      JOB_STATUS.Completed,
      b.recordUndo,
      b.verification,
    ],
  );
  return rows[0]!;
}
