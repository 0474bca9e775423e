import type { Queryable } from '../db/pool.js';
import { type ActivityType, findActivityType } from './activity-types.js';
import type { ActivityNode } from './definition-schema.js';
import type { DefinitionCache, DefinitionVersion } from './definitions.js';
import { findActivity } from './flowchart.js';
import { findHandler } from './handlers/index.js';
import { evaluateInputs } from './inputs.js';
import type { AlterableState } from './instance-state.js';
import { runHandler, startedRecord, takeHead } from './step-core.js';
import { settle } from './transitions.js';
import { TimeSlice } from '../vocabulary/time-slice.js';

/**
 * Steps that touch nothing outside Postgres run where the change that scheduled them is made: in the
 * transaction of a start, a trigger, an alteration or a plan's batch, up to the instance's next wait or
 * external call. Only what needs the world (an outbound call, an activity whose resilience strategy
 * retries it with backoff) is left to the instance's Temporal workflow, which the outbox tells.
 *
 * The steps run in memory, many instances at once; their activity records and journal lines are written
 * afterwards with one statement each (`writePureSteps`), in execution order, as the step executor would
 * have written them one at a time (both run a step through src/engine/step-core.ts).
 */
export const PURE_ACTIVITY_TYPES: ReadonlySet<string> = new Set([
  'Elsa.WriteLine',
  'Elsa.SetVariable',
  'Elsa.Event',
  'Elsa.Fault',
  'Elsa.Finish',
]);

/**
 * Pure steps one instance runs inline per change at most: a flowchart that loops through pure steps
 * forever, or a long chain of them, leaves the rest to its workflow, never holding a request's transaction.
 * There its step activity goes on with them in chunks (below), not one activity call per step.
 */
export const MAX_INLINE_STEPS = 100;

/**
 * Past the inline cap, the instance's step activity goes on with its pure steps in chunks
 * (src/engine/executor.ts, `continuePureSteps`): at most this many steps in one transaction (its row lock held
 * for tens of milliseconds, its records and journal written with one statement each) …
 */
export const PURE_STEPS_PER_CHUNK = 500;
/**
 * … and chunks for at most this long in one activity call, after which it returns to the workflow with the
 * rest still scheduled (`hasMoreWork`): one instance holds a step slot and a connection of the worker's pool
 * no longer than this before every other instance's workflow task has had its turn at the slots, and a local
 * activity stays well inside its workflow task's timeout.
 */
export const PURE_RUN_BUDGET_MS = 1_000;

export interface PureRecord {
  instance_id: string;
  tenant_id: string;
  activity_id: string;
  node_id: string;
  activity_type: string;
  name: string | null;
  status: 'Running' | 'Completed' | 'Faulted' | 'Canceled';
  inputs: Record<string, unknown>;
  started_at: string;
  completed_at: string | null;
}

export interface PureJournalLine {
  instance_id: string;
  activity_id: string;
  message: string;
  timestamp: string;
}

/** What pure steps wrote, in execution order, to be flushed by `writePureSteps`. */
export interface PureWrites {
  records: PureRecord[];
  journal: PureJournalLine[];
  /** Steps run, over every instance. */
  steps: number;
  /** Instances a step ended (Finish): their records already written and still Running become Canceled. */
  ended: { instance_id: string; at: string }[];
}

export const noPureWrites = (): PureWrites => ({ records: [], journal: [], steps: 0, ended: [] });

/** The activity at the head of the schedule, when it can run inline. */
function inlineHead(s: AlterableState, def: DefinitionVersion) {
  if (s.status !== 'Running' || s.subStatus === 'Faulted') return undefined;
  const head = s.scheduled[0];
  if (head === undefined) return undefined;
  const activity = findActivity(def.root, head);
  if (!activity || !PURE_ACTIVITY_TYPES.has(activity.type) || activity.resilienceStrategyId) return undefined;
  const type = findActivityType(activity.type);
  return type && findHandler(activity.type) ? { activity, type } : undefined;
}

/**
 * Runs the pure steps of each state (changed in place) until its next wait, external call or end.
 * `states` are rows the caller holds locked in its transaction; the caller saves them afterwards.
 */
export async function runPureSteps(
  db: Queryable,
  definitions: DefinitionCache,
  states: readonly AlterableState[],
  now: Date,
  writes: PureWrites = noPureWrites(),
  slice: TimeSlice = new TimeSlice(),
  maxSteps = MAX_INLINE_STEPS,
): Promise<PureWrites> {
  for (const s of states) {
    // Between instances, the event loop may turn (src/vocabulary/time-slice.ts).
    await slice.yield();
    const def = await definitions.byVersionId(db, s.definitionVersionId);
    if (!def) continue;
    // This instance's records are the ones written from here on (instances run one after the other).
    const firstRecord = writes.records.length;
    for (let n = 0; n < maxSteps; n++) {
      const head = inlineHead(s, def);
      if (!head) break;
      // A long run of one instance's steps lets the event loop turn too.
      if (n > 0) await slice.yield();
      takeHead(s);
      await runPureStep(s, def, head.activity, head.type, now, writes, firstRecord);
      s.updatedAt = now;
      settle(s, now);
    }
  }
  return writes;
}

/** Whether the activity at the head of the instance's schedule is a pure step (one `runPureSteps` would run). */
export function headIsPure(s: AlterableState, def: DefinitionVersion): boolean {
  return inlineHead(s, def) !== undefined;
}

/** One pure step, its record and journal lines kept in `writes` (the step core, src/engine/step-core.ts). */
async function runPureStep(
  s: AlterableState,
  def: DefinitionVersion,
  activity: ActivityNode,
  type: ActivityType,
  now: Date,
  writes: PureWrites,
  firstRecord: number,
): Promise<void> {
  const at = now.toISOString();
  const inputs = evaluateInputs(type, activity, def, s.variables);
  const started = startedRecord(def, activity, type, inputs);
  const record: PureRecord = {
    instance_id: s.id,
    tenant_id: s.tenantKey,
    activity_id: started.activityId,
    node_id: started.nodeId,
    activity_type: started.activityType,
    name: started.name,
    status: 'Running',
    inputs: started.inputs,
    started_at: at,
    completed_at: null,
  };
  writes.records.push(record);
  writes.steps++;
  const close = (r: PureRecord, status: PureRecord['status']) => {
    r.status = status;
    r.completed_at = at;
  };
  await runHandler(
    { s, def, activity, inputs, connection: undefined, now },
    {
      finishRecord: async (status) => close(record, status),
      cancelOthers: async () => {
        for (const r of writes.records.slice(firstRecord))
          if (r !== record && r.status === 'Running') close(r, 'Canceled');
        writes.ended.push({ instance_id: s.id, at });
      },
      writeJournal: async (message) => {
        writes.journal.push({ instance_id: s.id, activity_id: activity.id, message, timestamp: at });
      },
    },
  );
}

/** The INSERT of pure steps' records (`PureWrites.records`) given as the JSON array `param`, in their order. */
export const insertPureRecordsSql = (param: string) =>
  `INSERT INTO activity_records
     (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, inputs, started_at, completed_at)
   SELECT r.instance_id, r.tenant_id, r.activity_id, r.node_id, r.activity_type, r.name, r.status, r.inputs,
          r.started_at, r.completed_at
     FROM jsonb_to_recordset(${param}::jsonb) AS r(instance_id text, tenant_id text, activity_id text, node_id text,
          activity_type text, name text, status text, inputs jsonb, started_at timestamptz, completed_at timestamptz)`;

/** The INSERT of pure steps' journal lines (`PureWrites.journal`) given as the JSON array `param`, in their order. */
export const insertPureJournalSql = (param: string) =>
  `INSERT INTO journal_entries (instance_id, activity_id, message, timestamp)
   SELECT j.instance_id, j.activity_id, j.message, j.timestamp
     FROM jsonb_to_recordset(${param}::jsonb) AS j(instance_id text, activity_id text, message text, timestamp timestamptz)`;

/**
 * Writes the records and journal lines of pure steps: one statement each, in execution order (a set-returning
 * function's rows are inserted in the order it returns them, so the identity ids follow the array).
 */
export async function writePureSteps(db: Queryable, writes: PureWrites): Promise<void> {
  // Before the new records go in: theirs are as the steps left them.
  if (writes.ended.length > 0) {
    await db.query(
      `UPDATE activity_records r SET status = 'Canceled', completed_at = e.at
         FROM unnest($1::text[], $2::timestamptz[]) AS e(instance_id, at)
        WHERE r.instance_id = e.instance_id AND r.status = 'Running'`,
      [writes.ended.map((e) => e.instance_id), writes.ended.map((e) => e.at)],
    );
  }
  if (writes.records.length > 0) {
    await db.query(insertPureRecordsSql('$1'), [JSON.stringify(writes.records)]);
  }
  if (writes.journal.length > 0) {
    await db.query(insertPureJournalSql('$1'), [JSON.stringify(writes.journal)]);
  }
}
