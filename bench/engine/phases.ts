/**
 * The service's phases, over HTTP only: a. N instances started, b. one trigger resuming them all, c. a second
 * batch and a plan scheduling its SetVariable step (then c.burst and d, each in a file of its own).
 */
import { Client } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { cpuMark } from '../engine-procs.js';
import { planHistory } from '../history.js';
import { round } from '../util.js';
import { planBehindBurst } from './burst.js';
import { serviceCalls } from './calls.js';
import {
  COMPLETED,
  type Context,
  counter,
  cpuOf,
  fire,
  inPostgres,
  inTemporal,
  queryCount,
  quiet,
  reach,
  RUNNING,
} from './measure.js';
import { api } from './service.js';
import {
  BURST,
  CALLS,
  CLIENTS,
  DEFINITION_ID,
  ENGINE_DEFINITION,
  EVENT_NAME,
  INSTANCE_TYPE,
  lit,
  log,
  N,
  NAMESPACE,
  SET_ACTIVITY,
  SET_VALUE,
  TEMPORAL_POLL_MS,
  TEMPORAL_WAIT_MS,
  WAIT_MS,
  WARMUP,
  WARMUP_DEFINITION_ID,
  WARMUP_EVENT,
} from './settings.js';

export async function runService(ctx: Context, svc: { base: string; adminKey: string }) {
  const call = api(svc.base, svc.adminKey);
  const db = new pg.Client({ connectionString: `${ctx.pgBase}/workflow_alterations` });
  // A stop (Ctrl-C) ends the service's Postgres under this connection: not an error of the bench.
  db.on('error', () => undefined);
  await db.connect();
  const def = await call<{ id: string; version: number }>('POST', '/workflow-definitions', ENGINE_DEFINITION);
  log(`service: definition ${DEFINITION_ID} version ${def.version} published`);

  /** A plan watched on its event stream as a user would (it ends with `done` once the plan is finished), then read. */
  const watchPlan = async (planId: string, t0: number) => {
    const res = await fetch(`${svc.base}/alterations/${planId}/events`, {
      headers: { authorization: `ApiKey ${svc.adminKey}` },
      signal: AbortSignal.timeout(WAIT_MS),
    });
    if (!res.ok) throw new Error(`plan ${planId} events: HTTP ${res.status}`);
    const text = await res.text();
    const ms = round(performance.now() - t0);
    if (!text.includes('event: done')) throw new Error(`plan ${planId}: its event stream ended without done`);
    const { plan } = await call<{
      plan: { status: number; jobCounts: Record<string, number>; outcome: string | null };
    }>('GET', `/alterations/${planId}`);
    return { ms, status: plan.status, jobCounts: plan.jobCounts, outcome: plan.outcome };
  };
  /** The plan of phase c: the SetVariable step scheduled on the definition's Running instances (created before `before`). */
  const submitScheduleSet = (definitionId: string, before?: string) =>
    call<{ planId: string }>('POST', '/alterations/submit', {
      alterations: [{ type: 'ScheduleActivity', activityId: SET_ACTIVITY }],
      filter: {
        definitionIds: [definitionId],
        statuses: ['Running'],
        ...(before ? { timestampFilters: [{ column: 'CreatedAt', operator: 'LessThan', timestamp: before }] } : {}),
      },
    });

  if (WARMUP > 0) {
    // What the worker and the API do first (loading the workflow code into the sandbox, the first plan), done
    // before the measured phases: a definition of its own, with an event of its own.
    log(`service: warm-up (${WARMUP} instances started and triggered, ${WARMUP} more and a plan over them)`);
    ctx.serviceSampler.phase('warm-up');
    const t = performance.now();
    await call('POST', '/workflow-definitions', {
      ...ENGINE_DEFINITION,
      definitionId: WARMUP_DEFINITION_ID,
      root: {
        ...ENGINE_DEFINITION.root,
        activities: ENGINE_DEFINITION.root.activities.map((a) =>
          a.id === 'wait' ? { ...a, eventName: lit(WARMUP_EVENT) } : a,
        ),
      },
    });
    const startWarm = () =>
      fire(WARMUP, CLIENTS, async () => {
        await call('POST', '/workflow-instances', { definitionId: WARMUP_DEFINITION_ID });
      });
    await startWarm();
    await call('POST', `/events/${WARMUP_EVENT}/trigger`, {});
    await startWarm();
    const { planId } = await submitScheduleSet(WARMUP_DEFINITION_ID);
    await watchPlan(planId, t);
    // Temporal catches up with the warm-up before the phases count from it.
    const opts = { pollMs: TEMPORAL_POLL_MS, timeoutMs: 120_000, required: false };
    await reach('warm-up: instance workflows', t, 2 * WARMUP, counter(ctx, `WorkflowType='${INSTANCE_TYPE}'`), opts);
    await reach('warm-up: Completed', t, WARMUP, counter(ctx, COMPLETED(INSTANCE_TYPE)), opts);
    await quiet(ctx, 'warm-up', t);
  }

  /** Counted through the API, a page of 1000 at a time (the check that the API agrees with Postgres). */
  const apiCount = async (filter: Record<string, string>) => {
    let n = 0;
    let after: string | null = null;
    do {
      const q = new URLSearchParams({ definitionId: DEFINITION_ID, limit: '1000', ...filter });
      if (after) q.set('after', after);
      const page: { items: unknown[]; nextCursor: string | null } = await call('GET', `/workflow-instances?${q}`);
      n += page.items.length;
      after = page.nextCursor;
    } while (after);
    return n;
  };
  const suspended = () =>
    queryCount(
      db,
      `SELECT count(*) AS n FROM workflow_instances
        WHERE definition_id = $1 AND status = 'Running' AND sub_status = 'Suspended'`,
      [DEFINITION_ID],
    );
  const startBatch = async (label: string, prefix: string) => {
    const ids: string[] = new Array<string>(N);
    const running0 = await counter(ctx, RUNNING(INSTANCE_TYPE))();
    ctx.serviceSampler.phase(label);
    const cpu = cpuMark();
    const t0 = performance.now();
    const [starts, waiting, temporalRunning] = await Promise.all([
      fire(N, CLIENTS, async (i) => {
        const r = await call<{ workflowInstanceId: string }>('POST', '/workflow-instances', {
          definitionId: DEFINITION_ID,
          correlationId: `${prefix}-${i}`,
        });
        ids[i] = r.workflowInstanceId;
      }),
      inPostgres(`${label}: instances Running/Suspended`, t0, suspended),
      inTemporal(ctx, `${label}: ${INSTANCE_TYPE} Running`, t0, RUNNING(INSTANCE_TYPE), running0),
    ]);
    const cpuSplitOf = cpuOf(ctx, cpu);
    const quietMs = await quiet(ctx, label, t0);
    const viaApi = await apiCount({ status: 'Running', subStatus: 'Suspended' });
    log(
      `${label}: ${starts.perSecond} accepted/s (${starts.retries} sent again); all Running/Suspended after ${waiting.ms} ms; ${INSTANCE_TYPE} Running in Temporal: ${temporalRunning.count} after ${temporalRunning.ms ?? `> ${TEMPORAL_WAIT_MS}`} ms; API lists ${viaApi}`,
    );
    return { ids, starts, waiting, temporalRunning, quietMs, apiSuspended: viaApi, cpu: cpuSplitOf };
  };

  // a. N instances, 16 clients.
  log(`service a: ${N} instances by ${CLIENTS} concurrent clients`);
  const a = await startBatch('a', 'a');

  // b. One trigger resumes them all.
  log(`service b: POST /events/${EVENT_NAME}/trigger`);
  const completed0 = await counter(ctx, COMPLETED(INSTANCE_TYPE))();
  ctx.serviceSampler.phase('b');
  let cpu = cpuMark();
  let t0 = performance.now();
  const finishedA = () =>
    queryCount(db, `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND status = 'Finished'`, [
      a.ids,
    ]);
  const triggering = (async () => {
    const r = await call<{ resumedWorkflowInstanceIds: string[] }>('POST', `/events/${EVENT_NAME}/trigger`, {});
    return { ms: round(performance.now() - t0), resumed: r.resumedWorkflowInstanceIds.length };
  })();
  const [trigger, finished, temporalCompleted] = await Promise.all([
    triggering,
    inPostgres('b: instances Finished', t0, finishedA),
    inTemporal(ctx, `b: ${INSTANCE_TYPE} Completed`, t0, COMPLETED(INSTANCE_TYPE), completed0),
  ]);
  const bCpu = cpuOf(ctx, cpu);
  const bQuiet = await quiet(ctx, 'b', t0);
  const apiFinished = await apiCount({ status: 'Finished' });
  const setInA = await queryCount(
    db,
    `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND (variables->>'result')::int = $2`,
    [a.ids, SET_VALUE],
  );
  log(
    `b: trigger answered in ${trigger.ms} ms (${trigger.resumed} resumed); all Finished after ${finished.ms} ms (result set on ${setInA}); ${INSTANCE_TYPE} Completed in Temporal: ${temporalCompleted.count} after ${temporalCompleted.ms ?? `> ${TEMPORAL_WAIT_MS}`} ms; API lists ${apiFinished} Finished`,
  );

  // c. A second batch, then a plan scheduling the SetVariable step on it.
  log(`service c: a second batch of ${N}, then ScheduleActivity ${SET_ACTIVITY} over it`);
  const c = await startBatch('c', 'c');
  ctx.serviceSampler.phase('c.plan');
  cpu = cpuMark();
  t0 = performance.now();
  const { planId } = await submitScheduleSet(DEFINITION_ID);
  const submitMs = round(performance.now() - t0);
  const setInC = () =>
    queryCount(
      db,
      `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND (variables->>'result')::int = $2`,
      [c.ids, SET_VALUE],
    );
  const planDone = watchPlan(planId, t0);
  const [plan, effect] = await Promise.all([planDone, inPostgres('c: SetVariable ran (result = 42)', t0, setInC)]);
  const planCpu = cpuOf(ctx, cpu);
  const planQuiet = await quiet(ctx, 'c.plan', t0);
  const records = await queryCount(
    db,
    `SELECT count(*) AS n FROM activity_records WHERE instance_id = ANY($1::text[]) AND activity_id = $2 AND status = 'Completed'`,
    [c.ids, SET_ACTIVITY],
  ).catch(() => null);
  log(
    `c: plan ${planId} status ${plan.status} (${plan.outcome}) after ${plan.ms} ms; SetVariable ran on all ${N} after ${effect.ms} ms (${effect.perSecond}/s); its activity records Completed: ${records}`,
  );
  ctx.serviceSampler.phase(undefined);
  // Where the plan's time went, from its Temporal history (batches: queued, ran; the batch phase).
  const history = await planHistory(
    new Client({ connection: ctx.dev.connection, namespace: NAMESPACE }),
    planId,
    Math.min(loadConfig({}).alterations.window, loadConfig({}).database.batchSlots),
  ).catch((err: unknown) => {
    log(`c: the plan's history could not be read: ${String(err)}`);
    return null;
  });
  // c.burst. The same plan over the same instances (their result set back to 0, in SQL, with nothing told), right
  // after N other instances were started: its effect must not queue behind them being told to Temporal.
  const burst = BURST ? await planBehindBurst(ctx, call, db, c.ids, effect.ms ?? 0, submitScheduleSet) : null;
  const d = CALLS ? await serviceCalls(ctx, call, db) : null;
  await db.end();
  return {
    d,
    definitionVersion: def.version,
    a: {
      starts: a.starts,
      waiting: a.waiting,
      temporalRunning: a.temporalRunning,
      quietMs: a.quietMs,
      apiSuspended: a.apiSuspended,
      cpu: a.cpu,
    },
    b: { trigger, finished, setVariableDone: setInA, temporalCompleted, quietMs: bQuiet, apiFinished, cpu: bCpu },
    burst,
    c: {
      starts: c.starts,
      waiting: c.waiting,
      temporalRunning: c.temporalRunning,
      quietMs: c.quietMs,
      apiSuspended: c.apiSuspended,
      startCpu: c.cpu,
      plan: { planId, submitMs, ...plan, temporal: history },
      setVariable: effect,
      activityRecordsCompleted: records,
      quietMsAfterPlan: planQuiet,
      cpu: planCpu,
    },
  };
}
