/**
 * A plan behind another tenant's burst of starts: tenant B's plan alone, then submitted right after tenant A's
 * NOISY_BURST starts were accepted, while they are still being told to Temporal.
 */
import type { Client } from '@temporalio/client';
import pg from 'pg';
import { logPlanTimeline } from '../history.js';
import { DEFINITION } from '../size/settings.js';
import { round, sleep } from '../util.js';
import { caller } from './service.js';
import { B_SIZE, log, median, RUNS } from './settings.js';

/**
 * A plan behind another tenant's burst (contract section 8: a plan starts within a second of its submission
 * whatever the engine's backlog, and its effect does not queue behind instances still being told to Temporal):
 * tenant B's plan alone, RUNS times; then RUNS times, tenant A starts NOISY_BURST instances (16 clients, through
 * the API) and, as soon as they are accepted, while they are still being told to Temporal, B submits the same
 * plan. Its start (startedAt) and its end (completedAt), from its submission (createdAt), against the medians
 * alone. Target: both within 1 s of alone, in every run. NOISY_PHASES=burst runs this phase alone.
 */
export async function planBehindBurst(o: {
  base: string;
  databaseUrl: string;
  keyA: string;
  keyB: string;
  temporal: Client;
}) {
  const burstSize = Number(process.env.NOISY_BURST ?? 2_000);
  const clients = 16;
  const call = caller(o.base);
  const db = new pg.Client({ connectionString: o.databaseUrl });
  await db.connect();
  const outbox = async () => Number((await db.query('SELECT count(*) AS n FROM instance_outbox')).rows[0].n);
  /** Until the relay has told every instance and the machine has had a moment. */
  const drained = async () => {
    for (const deadline = Date.now() + 300_000; (await outbox()) > 0 && Date.now() < deadline;) await sleep(250);
    await sleep(1_000);
  };
  await call(o.keyA, 'POST', '/workflow-definitions', { ...DEFINITION, definitionId: 'burst' }).catch(() => undefined);
  let value = 1000;
  const planOfB = async () => {
    const { planId } = await call<{ planId: string }>(o.keyB, 'POST', '/alterations/submit', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: ++value }],
      filter: { definitionIds: [DEFINITION.definitionId] },
    });
    const res = await fetch(`${o.base}/alterations/${planId}/events`, {
      headers: { authorization: `ApiKey ${o.keyB}` },
    });
    if (!(await res.text()).includes('event: done')) throw new Error(`plan ${planId}: the stream ended without done`);
    const { plan } = await call<{ plan: { createdAt: string; startedAt: string; completedAt: string } }>(
      o.keyB,
      'GET',
      `/alterations/${planId}`,
    );
    const from = Date.parse(plan.createdAt);
    if (process.env.NOISY_TIMELINE === '1') await logPlanTimeline(o.temporal, planId, log);
    return { startMs: Date.parse(plan.startedAt) - from, endMs: Date.parse(plan.completedAt) - from };
  };
  const burstOfA = async (run: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        for (let i = next++; i < burstSize; i = next++)
          await call(o.keyA, 'POST', '/workflow-instances', {
            definitionId: 'burst',
            correlationId: `burst-${run}-${i}`,
          });
      }),
    );
  };
  log(`burst: tenant B's plan alone, ${RUNS} times`);
  await drained();
  await planOfB(); // warm-up
  const alone: { startMs: number; endMs: number }[] = [];
  for (let i = 0; i < RUNS; i++) alone.push(await planOfB());
  const startAlone = median(alone.map((r) => r.startMs));
  const endAlone = median(alone.map((r) => r.endMs));
  const behind: { startMs: number; endMs: number; outbox: number }[] = [];
  for (let i = 0; i < RUNS; i++) {
    await drained();
    await burstOfA(i);
    const waiting = await outbox();
    behind.push({ ...(await planOfB()), outbox: waiting });
    log(
      `burst run ${i + 1}: ${burstSize} of A's accepted, ${waiting} still to tell; B's plan ${JSON.stringify(behind.at(-1))}`,
    );
  }
  await drained();
  await db.end();
  const perRun = behind.map((r) => ({
    startOverMs: round(r.startMs - startAlone),
    endOverMs: round(r.endMs - endAlone),
  }));
  const within = perRun.filter((r) => r.startOverMs <= 1000 && r.endOverMs <= 1000).length;
  const report = {
    burstSize,
    tenantBPlanSize: B_SIZE,
    alone: alone.map((r) => ({ startMs: round(r.startMs), endMs: round(r.endMs) })),
    behindBurst: behind.map((r) => ({ startMs: round(r.startMs), endMs: round(r.endMs), outboxAtSubmit: r.outbox })),
    perRun,
    withinOneSecond: within,
    runs: RUNS,
  };
  const lines = [
    `tenant B's plan of ${B_SIZE} right after tenant A's ${burstSize} starts: alone start ${round(startAlone)} ms, end ${round(endAlone)} ms (medians)`,
    `  behind the burst, over alone (start / end): ${perRun.map((r) => `+${r.startOverMs} / +${r.endOverMs} ms`).join(', ')}; within 1 s: ${within} of ${RUNS}`,
  ];
  return { report, lines };
}
