/**
 * c.burst: phase c's plan again, right after N other instances were started, while they are still being told
 * to Temporal: its effect must not queue behind them.
 */
import { Client } from '@temporalio/client';
import type pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { cpuMark } from '../engine-procs.js';
import { planHistory } from '../history.js';
import { round } from '../util.js';
import { type Context, cpuOf, fire, inPostgres, queryCount, quiet } from './measure.js';
import type { api } from './service.js';
import { CLIENTS, DEFINITION_ID, log, N, NAMESPACE, SET_VALUE } from './settings.js';

/**
 * c.burst: phase c's plan again, over phase c's instances (their `result` back to 0 in SQL, the outbox off for it),
 * submitted as soon as N other instances have been accepted (16 clients), while those are still being told to
 * Temporal. Its effect (the SetVariable step run on all N, in Postgres) against phase c's, when Temporal was idle.
 */
export async function planBehindBurst(
  ctx: Context,
  call: ReturnType<typeof api>,
  db: pg.Client,
  targets: string[],
  idleMs: number,
  submit: (definitionId: string, before?: string) => Promise<{ planId: string }>,
) {
  await db.query('BEGIN');
  await db.query("SET LOCAL wfa.outbox = 'off'");
  await db.query(`UPDATE workflow_instances SET variables = variables || '{"result": 0}' WHERE id = ANY($1::text[])`, [
    targets,
  ]);
  await db.query('COMMIT');
  await quiet(ctx, 'c.burst: reset', performance.now());
  const before = new Date().toISOString();
  log(`service c.burst: ${N} more instances by ${CLIENTS} clients, then phase c's plan again over phase c's`);
  ctx.serviceSampler.phase('c.burst');
  const tBurst = performance.now();
  const starts = await fire(N, CLIENTS, async (i) => {
    await call('POST', '/workflow-instances', { definitionId: DEFINITION_ID, correlationId: `burst-${i}` });
  });
  const outbox = await queryCount(db, 'SELECT count(*) AS n FROM instance_outbox');
  // Where the machine's time goes from the plan's submission to its effect.
  const cpu = cpuMark();
  const t0 = performance.now();
  const { planId } = await submit(DEFINITION_ID, before);
  const setIn = () =>
    queryCount(
      db,
      `SELECT count(*) AS n FROM workflow_instances WHERE id = ANY($1::text[]) AND (variables->>'result')::int = $2`,
      [targets, SET_VALUE],
    );
  const effect = await inPostgres('c.burst: SetVariable ran (result = 42)', t0, setIn);
  const cpuSplit = cpuOf(ctx, cpu);
  // When it started (its jobs made), from its submission, by the service's clock.
  const viewed = await call<{ plan: { createdAt: string; startedAt: string | null } }>('GET', `/alterations/${planId}`);
  const startedMs = viewed.plan.startedAt
    ? Date.parse(viewed.plan.startedAt) - Date.parse(viewed.plan.createdAt)
    : null;
  const history = await planHistory(
    new Client({ connection: ctx.dev.connection, namespace: NAMESPACE }),
    planId,
    Math.min(loadConfig({}).alterations.window, loadConfig({}).database.batchSlots),
  ).catch(() => null);
  ctx.serviceSampler.phase(undefined);
  await quiet(ctx, 'c.burst', tBurst);
  const ratio = effect.ms !== null && idleMs ? round(effect.ms / idleMs, 2) : null;
  log(
    `c.burst: ${starts.perSecond} accepted/s; plan submitted with ${outbox} outbox rows waiting, started ${startedMs} ms after; SetVariable ran on all ${N} after ${effect.ms} ms (${effect.perSecond}/s), ${ratio}x phase c's ${idleMs} ms`,
  );
  return {
    starts,
    outboxAtSubmit: outbox,
    planId,
    startedMs,
    setVariable: effect,
    idleMs,
    ratio,
    cpu: cpuSplit,
    temporal: history,
  };
}
