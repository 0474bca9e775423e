import type { Queryable } from '../db/pool.js';
import type { DefinitionCache, DefinitionVersion } from '../engine/definitions.js';
import { findActivity } from '../engine/flowchart.js';
import { runPureSteps, writePureSteps } from '../engine/pure-steps.js';
import { settle } from '../engine/transitions.js';
import {
  ALTERABLE_COLUMNS,
  callsInFlightSql,
  OUTBOUND_ACTIVITY_TYPE,
  alterableFromRow,
  type AlterableRow,
  type AlterableState,
  type Bookmark,
  writeInstanceStates,
} from '../engine/instance-state.js';

export { hasRunnableWork } from '../engine/instance-state.js';
import { convertValue, isVariableType } from '../engine/values.js';
import { TimeSlice } from '../vocabulary/time-slice.js';
import { type Alteration, type AlterationType, LOG_LEVEL, type LogEntry } from './model.js';

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

/**
 * The definition versions a list of alterations can ask for, loaded before any instance is altered
 * (`resolveDefinitions`): each instance's current version and, for a Migrate, its definition's target
 * version. The handlers then run synchronously, so a batch of 1000 instances awaits its definitions once
 * instead of once per instance and alteration.
 */
export interface ResolvedDefinitions {
  byId: Map<string, DefinitionVersion>;
  /** `tenant \0 definitionId \0 version` → that version, or undefined when it does not exist. */
  byVersion: Map<string, DefinitionVersion | undefined>;
}

const versionKey = (tenantKey: string, definitionId: string, version: number) =>
  `${tenantKey}\u0000${definitionId}\u0000${version}`;

/** Loads (through the process's definition cache) every definition version these alterations may read. */
export async function resolveDefinitions(
  instances: Iterable<AlterableState | undefined>,
  alterations: readonly Alteration[],
  ctx: ApplyContext,
): Promise<ResolvedDefinitions> {
  const resolved: ResolvedDefinitions = { byId: new Map(), byVersion: new Map() };
  const targets = alterations.flatMap((a) => (a.type === 'Migrate' ? [a.targetVersion] : []));
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

type Handler<T extends Alteration> = (
  s: AlterableState,
  alteration: T,
  defs: ResolvedDefinitions,
) => string | undefined;

function currentDefinition(s: AlterableState, defs: ResolvedDefinitions): DefinitionVersion {
  const def = defs.byId.get(s.definitionVersionId);
  if (!def) throw new Error(`Definition version ${s.definitionVersionId} of instance ${s.id} is missing`);
  return def;
}

/**
 * Each handler changes the in-memory state and returns undefined, or returns why it failed. The state is a
 * copy whose `variables` and `scheduled` are its own; any other array or object is shared with the state as
 * read, so a handler replaces it and never changes it in place.
 */
const handlers: { [K in AlterationType]: Handler<Extract<Alteration, { type: K }>> } = {
  ModifyVariable(s, a, defs) {
    const def = currentDefinition(s, defs);
    const variable = def.variables.find((v) => v.id === a.variableId);
    if (!variable || !isVariableType(variable.typeName)) return `Variable with ID ${a.variableId} not found`;
    const converted = convertValue(variable.typeName, a.value);
    if (!converted.ok) return `Value is not a valid ${variable.typeName} for variable ${a.variableId}`;
    s.variables[a.variableId] = converted.value;
    return undefined;
  },

  Migrate(s, a, defs) {
    const target = defs.byVersion.get(versionKey(s.tenantKey, s.definitionId, a.targetVersion));
    if (!target) return `Workflow definition with ID ${s.definitionId} and version ${a.targetVersion} not found`;
    // Every activity the instance waits in, has scheduled or has a call out for must exist in the target version
    // (a call's outcome runs what follows it there). The bookmarks are checked once per list and target:
    // a job of many Migrates over an instance waiting on thousands of bookmarks checks them once.
    const missing =
      missingBookmark(s.bookmarks, target) ??
      [...s.scheduled, ...(s.callsInFlight ?? [])].find((id) => !findActivity(target.root, id));
    if (missing !== undefined) return `Activity ${missing} does not exist in version ${a.targetVersion}`;
    s.definitionVersionId = target.id;
    s.version = target.version;
    // Variables the target declares and the instance does not hold yet start at their defaults.
    for (const v of target.variables) {
      if (!(v.id in s.variables) && v.value !== undefined && isVariableType(v.typeName)) {
        const c = convertValue(v.typeName, v.value);
        s.variables[v.id] = c.ok ? c.value : null;
      }
    }
    return undefined;
  },

  ScheduleActivity(s, a, defs) {
    const def = currentDefinition(s, defs);
    if (!findActivity(def.root, a.activityId)) return `Activity with ID ${a.activityId} not found`;
    if (!s.scheduled.includes(a.activityId)) s.scheduled.push(a.activityId);
    // A suspended instance has work again; a faulted one stays faulted until it is retried.
    if (s.subStatus === 'Suspended') s.subStatus = 'Pending';
    return undefined;
  },

  CancelActivity(s, a, defs) {
    const def = currentDefinition(s, defs);
    if (!findActivity(def.root, a.activityId)) return `Activity with ID ${a.activityId} not found`;
    const scheduled = s.scheduled.includes(a.activityId);
    const waiting = s.bookmarks.some((b) => b.activityId === a.activityId);
    if (!scheduled && !waiting) return `Activity ${a.activityId} is not scheduled or waiting`;
    s.scheduled = s.scheduled.filter((id) => id !== a.activityId);
    s.bookmarks = s.bookmarks.filter((b) => b.activityId !== a.activityId);
    // Nothing follows the activity; the instance settles once the job's alterations have all succeeded
    // (`applyResolved`), so a later alteration of the same job still finds it running.
    return undefined;
  },

  Cancel(s) {
    s.status = 'Finished';
    s.subStatus = 'Cancelled';
    s.scheduled = [];
    s.bookmarks = [];
    s.finishedAt = s.updatedAt;
    return undefined;
  },
};

/**
 * The first bookmark whose activity the target version lacks, remembered per bookmark list and target: a
 * state's `bookmarks` is replaced, never changed in place (see `handlers`), so the same list gives the same
 * answer.
 */
const bookmarkChecks = new WeakMap<readonly Bookmark[], WeakMap<DefinitionVersion, string | null>>();
function missingBookmark(bookmarks: readonly Bookmark[], target: DefinitionVersion): string | undefined {
  let byTarget = bookmarkChecks.get(bookmarks);
  if (!byTarget) bookmarkChecks.set(bookmarks, (byTarget = new WeakMap()));
  let missing = byTarget.get(target);
  if (missing === undefined) {
    missing = bookmarks.find((b) => !findActivity(target.root, b.activityId))?.activityId ?? null;
    byTarget.set(target, missing);
  }
  return missing ?? undefined;
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
 * shared (the handlers replace arrays and objects, never change them in place; see `handlers`).
 */
export function copyState(instance: AlterableState): AlterableState {
  return { ...instance, variables: { ...instance.variables }, scheduled: [...instance.scheduled] };
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
    const failed =
      s.status === 'Finished'
        ? `Workflow instance ${s.id} is finished`
        : (handlers[alteration.type] as Handler<Alteration>)(s, alteration, defs);
    if (failed !== undefined) {
      log.push(entry(failed, LOG_LEVEL.Error, `Alteration ${alteration.type} failed`, now));
      return { ok: false, log, cancelled: false };
    }
    if (alteration.type === 'Cancel') cancelled = true;
    if (alteration.type === 'CancelActivity' && !closedActivities.includes(alteration.activityId))
      closedActivities.push(alteration.activityId);
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
  const { rows } = await db.query<AlterableRow>(
    `SELECT ${ALTERABLE_COLUMNS}, ${callsInFlightSql('workflow_instances')} FROM workflow_instances
      WHERE tenant_id = $1 AND id = ANY($2::text[]) ORDER BY id FOR UPDATE`,
    [tenantKey, ids],
  );
  return new Map(rows.map((r) => [r.id, alterableFromRow(r)]));
}

/**
 * Writes many altered instances in one statement, and their activity records as the alterations left them
 * (`writeRecordChanges`), before the records of the pure steps they scheduled.
 */
export async function saveInstances(
  db: Queryable,
  definitions: DefinitionCache,
  altered: readonly ApplyOutcome[],
  now: Date,
  before?: ReadonlyMap<string, AlterableState>,
  slice?: TimeSlice,
): Promise<void> {
  const states = altered.filter((o) => o.ok && o.state).map((o) => o.state!);
  // The work the alterations scheduled runs here as far as it is pure (src/engine/pure-steps.ts): a
  // ScheduleActivity of a SetVariable over a batch takes effect with the batch, set-based.
  const steps = await runPureSteps(db, definitions, states, now, undefined, slice);
  await writeInstanceStates(db, states, before);
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
  for (const o of altered) {
    if (!o.ok || !o.state) continue;
    const id = o.state.id;
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
