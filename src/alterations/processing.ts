import type pg from 'pg';
import type { Logger } from '../logger.js';
import { isUniqueViolation, SQLSTATE, sqlState } from '../db/errors.js';
import { withTransaction } from '../db/pool.js';
import type { DefinitionCache } from '../engine/definitions.js';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';
import type { PlanControl } from '../vocabulary/plan.js';
import { sameJson } from '../vocabulary/json.js';
import { mapInSlices, TimeSlice } from '../vocabulary/time-slice.js';
import { driftJoined, skipDrifted } from './drift.js';
import { BORN_PENDING } from './verification.js';
import { scheduleState } from './schedule.js';
import {
  completePlanRow,
  controlOf,
  failPlanRow,
  markRunning,
  pauseFor,
  type PlanRow,
  readControl,
  readForBatch,
} from './plan-store/index.js';
import {
  type ApplyOutcome,
  applyResolved,
  entry,
  hasRunnableWork,
  readInstances,
  resolveDefinitions,
  saveInstances,
  StaleReadError,
} from './apply.js';
import {
  type Alteration,
  AlterationSchema,
  isFinished,
  JOB_STATUS,
  LOG_LEVEL,
  PLAN_STATUS,
  type PauseReason,
} from './model.js';
import { JOB_UNWRITTEN, jobsInRange, NO_JOB_WRITTEN, revertFailureMessage, setOrdsInRange } from './plans.js';
import type { AlterableState } from '../engine/instance-state.js';
import { restore, undoImage, type UndoImage } from './undo.js';
import {
  metVersions,
  rememberVersions,
  runSetBased,
  setsVariablesOnly,
  versionOutcomes,
  versionsOf,
} from './set-based.js';

/**
 * Processing of a stored plan (src/alterations/plans.ts holds the store and its read model): the steps the
 * alterationPlan workflow runs as activities. Each is idempotent.
 */

export interface ProcessingDeps {
  pool: pg.Pool;
  definitions: DefinitionCache;
  clock?: Clock;
  /** false: jobs record no before-image (the bench measures their cost; nothing else sets it). */
  recordUndo?: boolean;
  /**
   * false: every batch runs in node, also where it could run set-based (src/alterations/set-based.ts); the test
   * that compares the two paths sets it, nothing else.
   */
  setBased?: boolean;
  /** Counts the jobs plan batches finish, for the operator's metrics (src/metrics/service-metrics.ts). */
  planMetrics?: PlanMetrics | undefined;
}

/** What plan processing reports to the operator's metrics: node-wide counts, never a plan or a tenant. */
export interface PlanMetrics {
  /** A batch committed this many jobs Completed and Failed (counted once: a retried attempt writes none). */
  jobsFinished(completed: number, failed: number, skipped?: number): void;
  /** A check of a plan's effect made this many jobs Verified and Unverified. */
  jobsVerified?(verified: number, unverified: number): void;
  /** A batch activity started on this worker; the function returned is called when it ends, however. */
  batchStarted(): () => void;
}

export type { PlanControl } from '../vocabulary/plan.js';

export interface BatchResult {
  /** Jobs this attempt processed, and how many of them failed. */
  processed: number;
  failed: number;
  /** Jobs of the batch's range completed, failed and skipped in all, whichever attempt committed them. */
  batch: { completed: number; failed: number; skipped: number };
  dispatched: number;
  /** The plan was cancelled (or otherwise ended): process no further batches. */
  stop: boolean;
  /** The plan is Paused: this batch did nothing and is to run again after a resume. */
  paused: boolean;
  /**
   * The batch did nothing and gave its slot back to another tenant's plan that is starting
   * (src/alterations/step-aside.ts): its range runs again at once. Absent otherwise.
   */
  steppedAside?: true;
  /** The plan's steering as this batch read it. */
  control: PlanControl;
}

interface BatchJob {
  ord: number;
  instance_id: string;
  /** The id of a Pending row written before job sets (null: the job has no row yet). */
  pending_id: string | null;
  /** When the plan's jobs were generated. */
  created_at: Date;
  /** Revert plans: the reverted job's before-image, the revision it wrote and when. */
  undo?: UndoImage | null;
  written?: number | null;
  written_at?: Date | null;
}

/**
 * Processes the pending jobs with ord in [fromOrd, toOrd): in one transaction, read the plan (a share
 * lock, so a pause or cancel waits for the batches in flight and none starts after it), read the range's
 * jobs that have no result yet, lock their instances (id order), apply the plan's alterations to each
 * instance in memory (atomic per instance), write all instances back and insert every job with its result
 * (and what restores its instance), one statement each. Then dispatch the altered instances that have
 * work. A retry after a crash finds the committed jobs written and re-dispatches (dispatch is idempotent),
 * so every job runs exactly once.
 */
export async function runJobBatch(deps: ProcessingDeps, args: BatchArgs): Promise<BatchResult> {
  try {
    return await runJobBatchOnce(deps, args);
  } catch (err) {
    // Another attempt at this range committed its jobs first (see the job insert): this one rolled back
    // whole, and running again finds them written, counts them and dispatches what they left runnable.
    // The key of the jobs' partition (alteration_jobs_20261130_pkey, alteration_jobs_legacy_pkey).
    if (isUniqueViolation(err) && /^alteration_jobs_\w+_pkey$/.test((err as { constraint?: string }).constraint ?? ''))
      return runJobBatchOnce(deps, { ...args, redispatch: true });
    throw err;
  }
}

interface BatchArgs {
  planId: string;
  fromOrd: number;
  toOrd: number;
  redispatch?: boolean;
  /** Read the instances row-locked (after a read without the lock went stale). */
  locked?: boolean;
}

/** What a batch's transaction did, for what follows its commit. */
interface BatchOutcome {
  /** Altered instances left with work to run (their workflows are told through the outbox). */
  toDispatch: number;
  processed: number;
  failed: number;
  /** Jobs that ended Skipped (their instance no longer matched the plan's filter), not among `processed`. */
  skipped?: number;
  control: PlanControl;
}

/** How often a locked attempt at a batch runs again after a deadlock before the activity fails (and is retried). */
const LOCKED_DEADLOCK_RETRIES = 3;

/** The batch's transaction (`processBatch`), then what the workflow is told (`reportBatch`). */
async function runJobBatchOnce(deps: ProcessingDeps, args: BatchArgs): Promise<BatchResult> {
  const run = (a: BatchArgs) => withTransaction(deps.pool, (client) => processBatch(deps, client, a));
  let outcome: BatchOutcome | undefined;
  let attempt = args;
  for (let deadlocks = 0; !outcome;) {
    try {
      outcome = await run(attempt);
    } catch (err) {
      // Read without row locks, and an instance changed before the batch wrote it (or two writers met in a
      // deadlock): nothing was committed; the same range again, its rows locked in id order, cannot go stale.
      // Locked, it may still meet a writer that takes the same rows in another order (a batch in node writes
      // them in the order its UPDATE's plan reads them): the one Postgres picked rolled back; it runs again.
      const deadlock = sqlState(err) === SQLSTATE.deadlockDetected;
      if (!(err instanceof StaleReadError || deadlock)) throw err;
      if (attempt.locked && (!deadlock || ++deadlocks > LOCKED_DEADLOCK_RETRIES)) throw err;
      attempt = { ...args, locked: true };
    }
  }
  // Counted once committed, before anything that could fail the attempt: the jobs are written whatever follows.
  if (outcome.processed > 0 || outcome.skipped)
    deps.planMetrics?.jobsFinished(outcome.processed - outcome.failed, outcome.failed, outcome.skipped ?? 0);
  return reportBatch(deps, args, outcome);
}

/**
 * In one transaction: the plan read under a share lock (a pause or cancel waits for the batches in flight),
 * the range's jobs without a result, their instances locked (id order), altered in memory, written back, and
 * every job inserted with its result.
 */
async function processBatch(deps: ProcessingDeps, client: pg.PoolClient, args: BatchArgs): Promise<BatchOutcome> {
  const clock = () => nowBy(deps.clock);
  const started = clock();
  // With the plan read, the transaction says what it is (migration 019's `wfa.cause`): the outbox rows of the
  // instances it writes name the plan (their workflows say "cancelled by plan …"). One round trip, not two.
  const plan = await readForBatch(client, args.planId);
  const control = controlOf(plan);
  const nothing = { toDispatch: 0, processed: 0, failed: 0, control };
  // A plan awaiting approval (held when its jobs were made) runs no batch, as a paused one does not.
  if (isFinished(plan.status) || plan.status === PLAN_STATUS.Paused || plan.status === PLAN_STATUS.AwaitingApproval)
    return nothing;
  // No batch starts outside the plan's maintenance windows (section 10), however late its activity began:
  // it reads as a pause by the schedule, and its range runs again once the window opens (the workflow
  // records the pause and waits for the window).
  if (plan.schedule && !scheduleState(plan.schedule, started).open) {
    // Half a step newer than the row it read: a batch that read the row before the window closed (still
    // running, same steering) does not undo this pause in the workflow; the row's next change outranks it.
    const paused = { ...control, status: PLAN_STATUS.Paused, pauseReason: 'schedule' as const };
    return { ...nothing, control: { ...paused, steering: control.steering + 0.5 } };
  }
  // The set was fixed while the plan waited for approval: what no longer matches its filter is left alone.
  const skipped =
    plan.approval !== null && plan.revert_of === null
      ? await skipDrifted(client, plan, args, await unwrittenJobs(client, plan, args), started)
      : 0;
  const alterations = plan.alterations.map((a) => AlterationSchema.parse(a));
  const setBased = deps.setBased !== false && setsVariablesOnly(alterations) && plan.revert_of === null;
  if (setBased) {
    const done = await runSetBasedBatch(deps, client, plan, args, alterations, started);
    if (done) return { ...done, control };
  }
  const jobs = await unwrittenJobs(client, plan, args);
  if (jobs.length === 0) return { ...nothing, skipped };
  // Without row locks, unless a first attempt went stale: the writes below check each row's revision.
  const locked = args.locked === true;
  const instances = await readInstances(
    client,
    plan.tenant_id,
    jobs.map((j) => j.instance_id),
    locked,
  );
  const now = clock();
  // In time slices: a batch of instances with thousands of bookmarks each never holds the worker's event
  // loop (its heartbeats, its other slots, and under `npm start` the API) for long.
  const slice = new TimeSlice();
  const outcomes = await alterJobs(deps, client, plan, alterations, jobs, instances, now, slice);
  if (!locked) await confirmRefusals(client, jobs, outcomes, instances);
  await saveInstances(client, deps.definitions, outcomes, now, instances, slice, !locked);
  const failed = outcomes.filter((o) => !o.ok).length;
  const verification = plan.verify ? BORN_PENDING : null;
  await writeJobs(deps, client, args, jobs, outcomes, instances, { started, now, failed, verification }, slice);
  return {
    toDispatch: outcomes.filter((o) => o.ok && o.state && hasRunnableWork(o.state)).length,
    processed: jobs.length,
    failed,
    skipped,
    control,
  };
}

/**
 * The batch as one statement in Postgres, where the plan only sets variables and the batch is one it takes
 * (src/alterations/set-based.ts): the statement reads the range's jobs from the plan's frozen set itself.
 * Undefined: nothing was written, the batch runs in node (which reads its jobs). Never on a locked attempt (after
 * a stale read), nor over a range with a job row already (a retried attempt, Pending rows written before job sets).
 */
async function runSetBasedBatch(
  deps: ProcessingDeps,
  client: pg.PoolClient,
  plan: PlanRow,
  args: BatchArgs,
  alterations: readonly Alteration[],
  started: Date,
): Promise<Omit<BatchOutcome, 'control'> | undefined> {
  if (args.locked) return undefined;
  const batch = {
    planId: args.planId,
    tenantId: plan.tenant_id,
    fromOrd: args.fromOrd,
    toOrd: args.toOrd,
    started,
    now: nowBy(deps.clock),
    recordUndo: deps.recordUndo !== false,
    verification: plan.verify ? BORN_PENDING : null,
  };
  const slice = new TimeSlice();
  let met = metVersions(args.planId);
  if (!met) {
    met = new Set(await versionsOf(client, batch));
    rememberVersions(args.planId, met);
  }
  let result = await runSetBased(client, {
    ...batch,
    outcomes: await versionOutcomes(client, deps.definitions, args.planId, alterations, slice),
  });
  // Versions without an outcome given that were not among those worked out (met by no earlier batch of the plan
  // in this process, or changed since the read above): worked out, and the statement once more if one of them has
  // an outcome now. A version worked out already and failing is not worked out again.
  const unmet = result.unmet.filter((v) => !met.has(v));
  if (!result.taken && unmet.length > 0) {
    rememberVersions(args.planId, unmet);
    const outcomes = await versionOutcomes(client, deps.definitions, args.planId, alterations, slice);
    if (unmet.some((v) => outcomes.has(v))) result = await runSetBased(client, { ...batch, outcomes });
  }
  const { jobs, taken, written } = result;
  if (!taken) return undefined;
  // Each instance was locked and found once; anything else rolls the batch back to run again locked, in node.
  if (written !== jobs) throw new StaleReadError(`${jobs - written} of ${jobs}`);
  return { toDispatch: 0, processed: jobs, failed: 0 };
}

/**
 * A job that failed on an instance read without its lock failed on that revision: the instance is locked
 * (shared) and must still be at it, or the batch runs again locked (StaleReadError). Failures are few.
 */
async function confirmRefusals(
  client: pg.PoolClient,
  jobs: readonly BatchJob[],
  outcomes: readonly ApplyOutcome[],
  instances: ReadonlyMap<string, AlterableState>,
): Promise<void> {
  const read = jobs.flatMap((j, i) => {
    const s = outcomes[i]!.ok ? undefined : instances.get(j.instance_id);
    return s ? [s] : [];
  });
  if (read.length === 0) return;
  const { rows } = await client.query<{ id: string; revision: number }>(
    'SELECT id, revision FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY id FOR SHARE',
    [read.map((s) => s.id)],
  );
  const current = new Map(rows.map((r) => [r.id, r.revision]));
  const stale = read.filter((s) => current.get(s.id) !== s.revision).length;
  if (stale > 0) throw new StaleReadError(`${stale} refused`);
}

/** The range's jobs still without a result (none when an earlier attempt committed them), in ord order. */
async function unwrittenJobs(client: pg.PoolClient, plan: PlanRow, args: BatchArgs): Promise<BatchJob[]> {
  const { rows } = await client.query<BatchJob>(
    plan.revert_of === null
      ? // One branch runs: the set alone when the range has no job row yet (the usual case), else the set
        // beside its rows (a retried attempt, or Pending rows written before job sets).
        `SELECT o.ord, m.instance_id, NULL::text AS pending_id, s.created_at
           ${setOrdsInRange('$2', '$3')} AND ${NO_JOB_WRITTEN('$2', '$3')}
         UNION ALL
         SELECT o.ord, m.instance_id, j.id AS pending_id, s.created_at
           ${jobsInRange('$2', '$3')} AND ${JOB_UNWRITTEN} AND NOT ${NO_JOB_WRITTEN('$2', '$3')}
         ORDER BY ord`
      : `SELECT o.ord, m.instance_id, j.id AS pending_id, s.created_at, r.undo, r.revision AS written,
                r.completed_at AS written_at
           ${jobsInRange('$2', '$3', 'LEFT JOIN alteration_jobs r ON r.plan_id = $4 AND r.ord = s.source_ords[m.k::int]')}
           AND ${JOB_UNWRITTEN} ORDER BY o.ord`,
    plan.revert_of === null
      ? [args.planId, args.fromOrd, args.toOrd]
      : [args.planId, args.fromOrd, args.toOrd, plan.revert_of],
  );
  return rows;
}

/** Each job's outcome: the plan's alterations applied to its instance in memory, or a revert's restore. */
async function alterJobs(
  deps: ProcessingDeps,
  client: pg.PoolClient,
  plan: PlanRow,
  alterations: readonly Alteration[],
  jobs: readonly BatchJob[],
  instances: ReadonlyMap<string, AlterableState>,
  now: Date,
  slice: TimeSlice,
): Promise<ApplyOutcome[]> {
  const ctx = { db: client, definitions: deps.definitions, now };
  // The definitions every job may need, loaded once; then each job is altered without awaiting.
  const defs = await resolveDefinitions(plan.revert_of === null ? instances.values() : [], alterations, ctx);
  const outcomes: ApplyOutcome[] = [];
  for (const job of jobs) {
    const instance = instances.get(job.instance_id);
    outcomes.push(
      plan.revert_of === null
        ? await applyResolved(instance, job.instance_id, alterations, defs, now, slice)
        : revertOne(instance, job, plan.revert_of, now),
    );
    await slice.yield();
  }
  return outcomes;
}

/**
 * Each job written once, with its result and what restores its instance, and the batch's counts, in one
 * statement (one round trip fewer per batch). Pending rows written before job sets are replaced (same id). A
 * concurrent attempt at the same range waited for this one's instance locks; its insert then violates the
 * primary key and it rolls back, instances included.
 */
async function writeJobs(
  deps: ProcessingDeps,
  client: pg.PoolClient,
  args: BatchArgs,
  jobs: readonly BatchJob[],
  outcomes: readonly ApplyOutcome[],
  instances: ReadonlyMap<string, AlterableState>,
  at: { started: Date; now: Date; failed: number; verification: number | null },
  slice: TimeSlice,
): Promise<void> {
  const written = deps.recordUndo === false ? [] : await beforeImages(jobs, outcomes, instances, slice);
  const legacy = jobs.filter((j) => j.pending_id !== null);
  if (legacy.length > 0) {
    await client.query('DELETE FROM alteration_jobs WHERE plan_id = $1 AND ord = ANY($2::int[]) AND status = $3', [
      args.planId,
      legacy.map((j) => j.ord),
      JOB_STATUS.Pending,
    ]);
  }
  // The jobs travel as one JSON document; an absent key is NULL (no pending id, no log, no before-image, the
  // range's first generation time: a job of a set generated at another time keeps its own, so that its id is the
  // one it showed while Pending, as the set-based statement writes it).
  const generated = jobs[0]!.created_at.getTime();
  const jobRows = jobs.map((j, i) => {
    const o = outcomes[i]!;
    const w = written[i];
    return {
      ord: j.ord,
      id: j.pending_id ?? undefined,
      created_at: j.created_at.getTime() === generated ? undefined : j.created_at.toISOString(),
      instance_id: j.instance_id,
      status: o.ok ? JOB_STATUS.Completed : JOB_STATUS.Failed,
      // A job whose alterations all succeeded stores no log (see jobLog); failed ones keep theirs.
      log: o.ok ? undefined : o.log,
      undo: w ? w.undo : undefined,
      revision: w ? w.revision : undefined,
      verification: o.ok ? (at.verification ?? undefined) : undefined,
    };
  });
  await client.query(
    `WITH jobs AS (
       INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, log, created_at, started_at, completed_at, undo, revision, verification)
       SELECT $1, u.ord, coalesce(u.id, wfa_job_id($1, coalesce(u.created_at, $2), u.ord)), u.instance_id, u.status, u.log,
              coalesce(u.created_at, $2), $3, $4, u.undo, u.revision, u.verification
         FROM jsonb_to_recordset($5::jsonb)
              AS u(ord int, id text, created_at timestamptz, instance_id text, status smallint, log jsonb, undo jsonb, revision int8,
                   verification smallint))
     INSERT INTO alteration_batch_counts (plan_id, from_ord, completed, failed) VALUES ($1, $6, $7, $8)
     ON CONFLICT (plan_id, from_ord) DO UPDATE
       SET completed = alteration_batch_counts.completed + EXCLUDED.completed, failed = alteration_batch_counts.failed + EXCLUDED.failed`,
    [
      args.planId,
      jobs[0]!.created_at,
      at.started,
      at.now,
      JSON.stringify(jobRows),
      args.fromOrd,
      outcomes.length - at.failed,
      at.failed,
    ],
  );
}

/** What restores each job's instance (its before-image) and the revision the job writes; null for a failed job. */
function beforeImages(
  jobs: readonly BatchJob[],
  outcomes: readonly ApplyOutcome[],
  instances: ReadonlyMap<string, AlterableState>,
  slice: TimeSlice,
): Promise<({ undo: UndoImage; revision: number } | null)[]> {
  return mapInSlices(
    outcomes,
    (o, i) => {
      const before = instances.get(jobs[i]!.instance_id);
      return o.ok && o.state && before ? { undo: undoImage(before, o.state), revision: before.revision + 1 } : null;
    },
    slice,
  );
}

const NOTHING_DONE = { processed: 0, failed: 0, batch: { completed: 0, failed: 0, skipped: 0 }, dispatched: 0 };

/** What a batch that stepped aside answers: nothing done, its range to run again (src/alterations/step-aside.ts). */
export async function steppedAside(deps: ProcessingDeps, planId: string): Promise<BatchResult> {
  return {
    ...NOTHING_DONE,
    stop: false,
    paused: false,
    steppedAside: true,
    control: await readPlanControl(deps, planId),
  };
}

/**
 * After the commit: what the workflow is told. A finished plan stops it; a paused one has this range run
 * again after the resume; otherwise the plan is Running, with the batch's counts.
 */
async function reportBatch(deps: ProcessingDeps, args: BatchArgs, outcome: BatchOutcome): Promise<BatchResult> {
  const { toDispatch, processed, failed, control } = outcome;
  if (isFinished(control.status)) return { ...NOTHING_DONE, stop: true, paused: false, control };
  if (control.status === PLAN_STATUS.Paused || control.status === PLAN_STATUS.AwaitingApproval)
    return { ...NOTHING_DONE, stop: false, paused: true, control };
  if (control.status === PLAN_STATUS.Dispatching) await markRunning(deps.pool, args.planId);
  // A first attempt's counts are the batch's; a retry reads what an earlier attempt may have committed. So
  // does a batch that found its whole range written: a range run again after a resume whose earlier run
  // committed, then failed and was retried into the pause, which reported nothing done. Its jobs are
  // counted once all the same (the workflow counted none of that paused run's). What the jobs left for the
  // instances' workflows committed with them, in the outbox (migration 011).
  let batch = { completed: processed - failed, failed, skipped: outcome.skipped ?? 0 };
  if (args.redispatch || processed === 0) {
    const { rows: counted } = await deps.pool.query<{ completed: number; failed: number; skipped: number }>(
      'SELECT completed, failed, skipped FROM alteration_batch_counts WHERE plan_id = $1 AND from_ord = $2',
      [args.planId, args.fromOrd],
    );
    batch = counted[0] ?? batch;
  }
  return { processed, failed, batch, dispatched: toDispatch, stop: false, paused: false, control };
}

/**
 * A revert job: the instance as the reverted job found it, when nothing has written it since (its
 * revision is still the one that job wrote); otherwise a failure saying so, and the instance untouched.
 */
export function revertOne(
  instance: AlterableState | undefined,
  job: Pick<BatchJob, 'instance_id' | 'undo' | 'written' | 'written_at'>,
  revertOf: string,
  now: Date,
): ApplyOutcome {
  if (!instance) {
    return {
      ok: false,
      log: [entry(`Workflow instance ${job.instance_id} not found`, LOG_LEVEL.Error, null, now)],
      cancelled: false,
    };
  }
  if (!job.undo || job.written === null || job.written === undefined || instance.revision !== Number(job.written)) {
    return {
      ok: false,
      log: [entry(revertFailureMessage(revertOf), LOG_LEVEL.Error, 'Alteration revert failed', now)],
      cancelled: false,
    };
  }
  const state = restore(instance, job.undo);
  // The activity records follow the bookmarks: an activity that waits again has its record Running again
  // (the one the reverted job marked Canceled, at its time), and one that no longer waits has it Canceled;
  // an instance cancelled again (a revert of a reverted Cancel) has all its running records Canceled.
  const waitingNow = new Set(instance.bookmarks.map((b) => b.activityId));
  const waitingThen = new Set(state.bookmarks.map((b) => b.activityId));
  const closedActivities = [...waitingNow].filter((a) => !waitingThen.has(a));
  const reopened = [...waitingThen].filter((a) => !waitingNow.has(a));
  // Outbound calls the reverted job cancelled (a Cancel, a CancelActivity of an activity whose call was out) are
  // out again when the instance runs again: their records Running, so its workflow makes them (same key).
  // Only a job that changed where the instance stood can have (a ModifyVariable's revert looks for none); only
  // that job's transaction closed records of this instance at its time.
  const calls =
    state.status === 'Running' &&
    (instance.status !== state.status ||
      instance.subStatus !== state.subStatus ||
      !sameJson(instance.scheduled, state.scheduled));
  return {
    ok: true,
    log: [],
    state,
    cancelled: state.subStatus === 'Cancelled' && instance.subStatus !== 'Cancelled',
    ...(closedActivities.length > 0 ? { closedActivities } : {}),
    ...((reopened.length > 0 || calls) && job.written_at
      ? { reopened: { activityIds: reopened, at: job.written_at, calls } }
      : {}),
  };
}

/**
 * Pauses a plan that is still to be processed (the workflow does, for its canary or too many failures);
 * answers the plan's steering afterwards, whatever it was.
 */
export function pausePlanFor(deps: ProcessingDeps, planId: string, reason: PauseReason): Promise<PlanControl> {
  return pauseFor(deps.pool, planId, reason);
}

/** The plan's steering as its row says now. */
export function readPlanControl(deps: ProcessingDeps, planId: string): Promise<PlanControl> {
  return readControl(deps.pool, planId);
}

/**
 * Marks a processed plan Completed (unless it was cancelled or failed meanwhile; a pause comes too late),
 * but only when every job has its result: the batches' counts (written with the jobs, in one statement)
 * add up to the plan's total. Fewer means batches were skipped (a worker that sized them otherwise, say,
 * took the plan over mid-way): that is an error to see, never a Completed plan with jobs that did not run.
 */
export async function completePlan(deps: ProcessingDeps & { logger?: Logger }, planId: string): Promise<void> {
  const joined = await driftJoined(deps, planId);
  const plan = await completePlanRow(deps.pool, planId, nowBy(deps.clock), joined);
  if (plan && !isFinished(plan.status) && (plan.job_total ?? 0) > plan.done) {
    throw new Error(
      `${(plan.job_total ?? 0) - plan.done} of ${plan.job_total} jobs have no result, so the plan cannot be completed`,
    );
  }
}

/** Marks a plan that could not be processed Failed, with the reason. */
export async function failPlan(deps: ProcessingDeps, planId: string, reason: string): Promise<void> {
  await failPlanRow(deps.pool, planId, reason, nowBy(deps.clock));
}
