import type { Queryable } from '../db/pool.js';
import type { DefinitionCache } from '../engine/definitions.js';
import { runPureSteps, writePureSteps } from '../engine/pure-steps.js';
import { settle } from '../engine/transitions.js';
import {
  ALTERABLE_COLUMNS,
  callsInFlightSql,
  OUTBOUND_ACTIVITY_TYPE,
  alterableFromRow,
  type AlterableRow,
  type AlterableState,
  type MovedActivity,
  writeInstanceStates,
} from '../engine/instance-state.js';

export { hasRunnableWork } from '../engine/instance-state.js';
import { TimeSlice } from '../vocabulary/time-slice.js';
import { type Alteration, LOG_LEVEL, type LogEntry } from './model.js';
import { specOf } from './types/index.js';
import { type ResolvedDefinitions, versionKey } from './types/spec.js';

export type { ResolvedDefinitions } from './types/spec.js';

export interface ApplyContext {
  db: Queryable;
  definitions: DefinitionCache;
  now: Date;
}

/** What applying a list of alterations to one instance did. */
export interface ApplyOutcome {
  /** true only when every alteration succeeded. */
  ok: boolean;
  /** One entry per alteration attempted. */
  log: LogEntry[];
  /** The altered state when ok; the instance is left exactly as it was otherwise. */
  state?: AlterableState;
  /** The instance was cancelled: its running activity records are to be marked Canceled. */
  cancelled: boolean;
  /** Activities whose running records are to be marked Canceled (CancelActivity, a revert's removed bookmarks). */
  closedActivities?: string[];
  /**
   * A revert only: activities that wait again (their bookmarks restored) whose records the reverted job
   * marked Canceled, at `at` (that job's time), are Running again.
   */
  reopened?: { activityIds: string[]; at: Date; calls?: boolean };
}

/** Loads (through the process's definition cache) every definition version these alterations may read. */
export async function resolveDefinitions(
  instances: Iterable<AlterableState | undefined>,
  alterations: readonly Alteration[],
  ctx: ApplyContext,
): Promise<ResolvedDefinitions> {
  const resolved: ResolvedDefinitions = { byId: new Map(), byVersion: new Map() };
  const targets = alterations.flatMap((a) => specOf(a).definitionVersions?.(a) ?? []);
  for (const s of instances) {
    if (!s) continue;
    if (!resolved.byId.has(s.definitionVersionId)) {
      const def = await ctx.definitions.byVersionId(ctx.db, s.definitionVersionId);
      if (def) resolved.byId.set(def.id, def);
    }
    for (const version of targets) {
      const key = versionKey(s.tenantKey, s.definitionId, version);
      if (resolved.byVersion.has(key)) continue;
      const def = await ctx.definitions.byVersion(ctx.db, s.tenantKey, s.definitionId, version);
      resolved.byVersion.set(key, def);
      if (def) resolved.byId.set(def.id, def);
    }
  }
  return resolved;
}

let lastNow: Date | undefined;
let lastNowIso = '';

export function entry(message: string, logLevel: LogEntry['logLevel'], eventName: string | null, now: Date): LogEntry {
  // A batch stamps every entry with the same time: format it once.
  if (now !== lastNow) {
    lastNow = now;
    lastNowIso = now.toISOString();
  }
  return { message, logLevel, timestamp: lastNowIso, eventName };
}

/**
 * A copy of an instance that alterations may change: its own `variables` and `scheduled`, everything else
 * shared (an alteration replaces arrays and objects, never changes them in place: `AlterationTypeSpec.apply`).
 */
export function copyState(instance: AlterableState): AlterableState {
  // Variables without a prototype: one named `__proto__` is set like any other (on `{}` its setter drops it).
  const variables = Object.assign(Object.create(null) as Record<string, unknown>, instance.variables);
  return { ...instance, variables, scheduled: [...instance.scheduled] };
}

/**
 * The one function that alters an instance: applies the alterations in order to a copy of its state.
 * The first failure stops the rest and discards every change, so a job is atomic per instance. Plans,
 * run, retry and preview all come through here (a batch through `applyResolved` after resolving its
 * definitions once).
 */
export async function applyAlterations(
  instance: AlterableState | undefined,
  instanceId: string,
  alterations: readonly Alteration[],
  ctx: ApplyContext,
  slice?: TimeSlice,
): Promise<ApplyOutcome> {
  const defs = await resolveDefinitions([instance], alterations, ctx);
  return applyResolved(instance, instanceId, alterations, defs, ctx.now, slice);
}

/**
 * `applyAlterations` with the definitions already resolved for this instance (`resolveDefinitions`). Each
 * alteration costs at most a map read per activity the instance waits in or has scheduled, and the loop
 * lets the event loop turn when its time slice is spent: a 1 MiB body holds some 28,000 alterations, and an
 * instance may wait on thousands of bookmarks.
 */
export async function applyResolved(
  instance: AlterableState | undefined,
  instanceId: string,
  alterations: readonly Alteration[],
  defs: ResolvedDefinitions,
  now: Date,
  slice: TimeSlice = new TimeSlice(),
): Promise<ApplyOutcome> {
  if (!instance) {
    return {
      ok: false,
      log: [entry(`Workflow instance ${instanceId} not found`, LOG_LEVEL.Error, null, now)],
      cancelled: false,
    };
  }
  const s = copyState(instance);
  s.updatedAt = now;
  const log: LogEntry[] = [];
  let cancelled = false;
  const closedActivities: string[] = [];
  for (const alteration of alterations) {
    await slice.yield();
    const spec = specOf(alteration);
    const failed = s.status === 'Finished' ? `Workflow instance ${s.id} is finished` : spec.apply(s, alteration, defs);
    if (failed !== undefined) {
      log.push(entry(failed, LOG_LEVEL.Error, `Alteration ${alteration.type} failed`, now));
      return { ok: false, log, cancelled: false };
    }
    const closes = spec.closesRecords?.(alteration);
    if (closes?.of === 'instance') cancelled = true;
    if (closes?.of === 'activity' && !closedActivities.includes(closes.activityId))
      closedActivities.push(closes.activityId);
    log.push(
      entry(`${alteration.type} succeeded`, LOG_LEVEL.Information, `Alteration ${alteration.type} succeeded`, now),
    );
  }
  // As if the cancelled activities had ended without an outcome: the instance goes on with what is left,
  // and finishes when nothing else is scheduled or waiting (a faulted one stays faulted until retried).
  if (closedActivities.length > 0) {
    // A call out for a cancelled activity (scheduled again while its call was out) is closed with it.
    s.callsInFlight = s.callsInFlight?.filter((a) => !closedActivities.includes(a));
    settle(s, now);
  }
  return { ok: true, log, state: s, cancelled, ...(closedActivities.length > 0 ? { closedActivities } : {}) };
}

/** Locks the tenant's instances with these ids, in id order (so concurrent batches never deadlock). */
export async function lockInstances(
  db: Queryable,
  tenantKey: string,
  ids: readonly string[],
): Promise<Map<string, AlterableState>> {
  return readInstances(db, tenantKey, ids, true);
}

/**
 * Reads the tenant's instances with these ids; `lock`: row-locked, in id order. A plan's batch reads without
 * the lock and writes only rows still at the revision it read (`saveInstances` with `guard`): the lock wrote
 * every row twice (its lock, then its new version) for a conflict that seldom happens.
 */
export async function readInstances(
  db: Queryable,
  tenantKey: string,
  ids: readonly string[],
  lock: boolean,
): Promise<Map<string, AlterableState>> {
  const { rows } = await db.query<AlterableRow>(
    `SELECT ${ALTERABLE_COLUMNS}, ${callsInFlightSql('workflow_instances')} FROM workflow_instances
      WHERE tenant_id = $1 AND id = ANY($2::text[])${lock ? ' ORDER BY id FOR UPDATE' : ''}`,
    [tenantKey, ids],
  );
  return new Map(rows.map((r) => [r.id, alterableFromRow(r)]));
}

/** An instance a batch read without its lock changed before the batch wrote it: roll back and run locked. */
export class StaleReadError extends Error {
  constructor(what: string) {
    super(`An instance changed while the batch ran (${what}); running the batch again with its rows locked`);
  }
}

/**
 * Writes many altered instances in one statement, and their activity records as the alterations left them
 * (`writeRecordChanges`), before the records of the pure steps they scheduled.
 *
 * `guard`: `before` was read without row locks (`readInstances`); an instance written since is not
 * overwritten, and StaleReadError is thrown before anything else is written (the caller rolls back).
 */
export async function saveInstances(
  db: Queryable,
  definitions: DefinitionCache,
  altered: readonly ApplyOutcome[],
  now: Date,
  before?: ReadonlyMap<string, AlterableState>,
  slice?: TimeSlice,
  guard = false,
): Promise<void> {
  const states = altered.filter((o) => o.ok && o.state).map((o) => o.state!);
  // The work the alterations scheduled runs here as far as it is pure (src/engine/pure-steps.ts): a
  // ScheduleActivity of a SetVariable over a batch takes effect with the batch, set-based.
  const steps = await runPureSteps(db, definitions, states, now, undefined, slice);
  const written = await writeInstanceStates(db, states, before, guard);
  if (guard && written !== states.length) throw new StaleReadError(`${states.length - written} of ${states.length}`);
  // Records first: a CancelActivity followed by a ScheduleActivity of the same activity closes the record
  // it had, never the one its step now writes.
  await writeRecordChanges(db, altered, now);
  await writePureSteps(db, steps);
}

/**
 * The activity records of the altered instances, set-based (at most one statement of each kind per batch,
 * whatever its size): a cancelled instance's running records and a cancelled activity's become Canceled;
 * a revert makes the records its reverted job canceled Running again where their bookmark came back.
 */
async function writeRecordChanges(db: Queryable, altered: readonly ApplyOutcome[], now: Date): Promise<void> {
  const cancelled: string[] = [];
  const closed: { instance: string[]; activity: string[] } = { instance: [], activity: [] };
  const reopened: { instance: string[]; activity: string[]; at: Date[] } = { instance: [], activity: [], at: [] };
  const callsOut: { instance: string[]; at: Date[] } = { instance: [], at: [] };
  const moved: (MovedActivity & { instance: string })[] = [];
  for (const o of altered) {
    if (!o.ok || !o.state) continue;
    const id = o.state.id;
    for (const m of o.state.movedActivities ?? []) moved.push({ ...m, instance: id });
    if (o.cancelled) cancelled.push(id);
    // A cancelled instance's records are all closed by the first statement.
    else
      for (const activityId of o.closedActivities ?? []) {
        closed.instance.push(id);
        closed.activity.push(activityId);
      }
    if (o.reopened?.calls) {
      callsOut.instance.push(id);
      callsOut.at.push(o.reopened.at);
    }
    for (const activityId of o.reopened?.activityIds ?? []) {
      reopened.instance.push(id);
      reopened.activity.push(activityId);
      reopened.at.push(o.reopened!.at);
    }
  }
  if (cancelled.length > 0) {
    await db.query(
      `UPDATE activity_records SET status = 'Canceled', completed_at = $2
        WHERE instance_id = ANY($1::text[]) AND status = 'Running'`,
      [cancelled, now],
    );
  }
  if (closed.instance.length > 0) {
    await db.query(
      `UPDATE activity_records r SET status = 'Canceled', completed_at = $3
         FROM unnest($1::text[], $2::text[]) AS c(instance_id, activity_id)
        WHERE r.instance_id = c.instance_id AND r.activity_id = c.activity_id AND r.status = 'Running'`,
      [closed.instance, closed.activity, now],
    );
  }
  if (reopened.instance.length > 0) {
    await db.query(
      `UPDATE activity_records r SET status = 'Running', completed_at = NULL
         FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS c(instance_id, activity_id, at)
        WHERE r.instance_id = c.instance_id AND r.activity_id = c.activity_id AND r.status = 'Canceled'
          AND r.completed_at = c.at`,
      [reopened.instance, reopened.activity, reopened.at],
    );
  }
  if (moved.length > 0) {
    // A Migrate's activity mappings: the record of where the instance waited ends, one where it now waits
    // starts with the same inputs (the journal and the old record keep the old id; a revert of the job
    // closes the new record and reopens the old one, as for any bookmark it puts back).
    await db.query(
      `WITH m AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb)
           AS m(instance text, "from" text, "to" text, "nodeId" text, "activityType" text, name text)
       ), ended AS (
         UPDATE activity_records r SET status = 'Canceled', completed_at = $2
           FROM m WHERE r.instance_id = m.instance AND r.activity_id = m."from" AND r.status = 'Running'
         RETURNING r.instance_id, r.tenant_id, r.inputs, m."to", m."nodeId", m."activityType", m.name
       )
       INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, inputs, started_at)
       SELECT instance_id, tenant_id, "to", "nodeId", "activityType", name, 'Running', inputs, $2 FROM ended`,
      [JSON.stringify(moved), now],
    );
  }
  if (callsOut.instance.length > 0) {
    // Out again: the instance's workflow is told it has work and makes the call again, same Idempotency-Key.
    await db.query(
      `UPDATE activity_records r SET status = 'Running', completed_at = NULL
         FROM unnest($1::text[], $2::timestamptz[]) AS c(instance_id, at)
        WHERE r.instance_id = c.instance_id AND r.status = 'Canceled' AND r.completed_at = c.at
          AND r.activity_type = '${OUTBOUND_ACTIVITY_TYPE}'`,
      [callsOut.instance, callsOut.at],
    );
  }
}
