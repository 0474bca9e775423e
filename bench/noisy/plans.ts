/**
 * The plan phases: tenant B's plan alone, RUNS times; then beside tenant A's plan of A_SIZE and A's calls that
 * never end, RUNS times, each started once A's plan is well under way; `/health` probed throughout.
 */
import { Client, type Connection } from '@temporalio/client';
import { logPlanTimeline } from '../history.js';
import { HTTP_CONNECTION_TYPE, oneCallDefinition, RANDOM_IDS, round, sleep } from '../util.js';
import type { Call } from './service.js';
import { DEFINITION } from '../size/settings.js';
import { A_HEAD, A_SIZE, B_SIZE, CALLS, FRESH_PAGES, log, median, quantiles, RUNS } from './settings.js';

/** The phases' figures for the results file, and the lines printed at the end. */
export async function tenantPlans(o: {
  base: string;
  call: Call;
  keyA: string;
  keyB: string;
  /** The dev server, for NOISY_TIMELINE=1. */
  connection: Connection;
  /** The endpoint that never answers: its port, and how many calls it holds now and held at most at once. */
  endpoint: { port: number; held: () => number; heldMax: () => number };
}): Promise<{ report: Record<string, unknown>; lines: string[] }> {
  const { base, call, keyA, keyB } = o;
  // A plan, watched on its event stream as a user would; its time from submit to `done`.
  let value = 0;
  const runPlan = async (key: string, submitted?: (planId: string) => void) => {
    const t0 = performance.now();
    const { planId } = await call<{ planId: string }>(key, 'POST', '/alterations/submit', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: ++value }],
      filter: { definitionIds: [DEFINITION.definitionId] },
    });
    submitted?.(planId);
    const res = await fetch(`${base}/alterations/${planId}/events`, {
      headers: { authorization: `ApiKey ${key}` },
    });
    if (!res.ok) throw new Error(`events: HTTP ${res.status}`);
    const text = await res.text();
    if (!text.includes('event: done')) throw new Error(`plan ${planId}: the stream ended without done`);
    const endedAt = performance.now();
    return { planId, ms: endedAt - t0, endedAt };
  };
  /** Until A's plan has done A_HEAD of its jobs (read as a user would, every 20 ms), or has ended. */
  const underWay = async (planId: () => string | undefined) => {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(20)) {
      const id = planId();
      if (id === undefined) continue;
      const { plan } = await call<{ plan: { status: number; jobCounts?: { completed?: number } } }>(
        keyA,
        'GET',
        `/alterations/${id}`,
      );
      if ([4, 5, 6].includes(plan.status) || (plan.jobCounts?.completed ?? 0) >= A_HEAD * A_SIZE) return;
    }
  };

  // /health, every 100 ms, in both phases.
  let health: number[] = [];
  let probing = true;
  const prober = (async () => {
    while (probing) {
      const t = performance.now();
      const r = await fetch(`${base}/health`).catch(() => undefined);
      await r?.text();
      health.push(r?.ok ? performance.now() - t : Number.POSITIVE_INFINITY);
      await sleep(100);
    }
  })();

  await runPlan(keyB); // warm-up: the worker's first plan loads the workflow code
  health = [];
  const alone: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const b = await runPlan(keyB);
    alone.push(b.ms);
    if (process.env.NOISY_TIMELINE === '1')
      await logPlanTimeline(new Client({ connection: o.connection }), b.planId, log);
  }
  const healthAlone = quantiles(health);
  log(`B alone: ${alone.map((ms) => round(ms)).join(', ')} ms`);

  // Tenant A: calls that never end, then its big plan.
  await call(keyA, 'POST', '/connection-configuration', {
    name: 'never-answers',
    connectionType: HTTP_CONNECTION_TYPE,
    connectionConfiguration: {
      baseUrl: `http://127.0.0.1:${o.endpoint.port}/`,
      timeoutMs: 300_000,
    },
  });
  await call(keyA, 'POST', '/workflow-definitions', oneCallDefinition('calling', 'never-answers', 'POST', 'hang'));
  for (let i = 0; i < CALLS; i++) await call(keyA, 'POST', '/workflow-instances', { definitionId: 'calling' });
  for (const deadline = Date.now() + 30_000; o.endpoint.held() < 5 && Date.now() < deadline;) await sleep(100);
  log(`A: ${CALLS} instances calling the endpoint; it holds ${o.endpoint.held()} of them`);

  const noisy: number[] = [];
  const aPlans: number[] = [];
  health = [];
  // Whether A's plan was still running when B's ended: a run where it was not measured B beside less of A.
  const aThroughout: boolean[] = [];
  for (let i = 0; i < RUNS; i++) {
    let aPlanId: string | undefined;
    const a = runPlan(keyA, (id) => (aPlanId = id));
    // B's plan starts once A's is well under way (A_HEAD of its jobs done, its batches running).
    await underWay(() => aPlanId);
    const b = await runPlan(keyB);
    noisy.push(b.ms);
    const aDone = await a;
    aPlans.push(aDone.ms);
    aThroughout.push(aDone.endedAt > b.endedAt);
    if (process.env.NOISY_TIMELINE === '1')
      await logPlanTimeline(new Client({ connection: o.connection }), b.planId, log);
  }
  const healthNoisy = quantiles(health);
  probing = false;
  await prober;
  log(
    `B with A running: ${noisy.map((ms) => round(ms)).join(', ')} ms (A's plans: ${aPlans.map((ms) => round(ms)).join(', ')} ms)`,
  );
  if (aThroughout.includes(false))
    log(`WARNING: in runs ${aThroughout.flatMap((t, i) => (t ? [] : [i + 1])).join(', ')} A's plan ended before B's`);
  const perRun = noisy.map((ms) => round(ms / median(alone), 2));
  const ratio = round(median(noisy) / median(alone), 2);
  const report = {
    sizes: {
      tenantA: A_SIZE,
      tenantB: B_SIZE,
      callsOfA: CALLS,
      runs: RUNS,
      freshPages: FRESH_PAGES,
      randomIds: RANDOM_IDS,
    },
    tenantB: {
      aloneMs: alone.map((x) => round(x)),
      withNoisyAMs: noisy.map((x) => round(x)),
      ratio,
      /** Each run beside A over the median alone: the target holds when every one is within it. */
      perRun,
      target: 1.5,
      aRunningThroughout: aThroughout,
      startedAtAShare: A_HEAD,
    },
    tenantAPlanMs: aPlans.map((x) => round(x)),
    health: { alone: healthAlone, withNoisyA: healthNoisy },
    endpoint: { heldAtOnceMax: o.endpoint.heldMax(), share: 5 },
  };
  const lines = [
    `tenant B's plan of ${B_SIZE}: alone median ${round(median(alone))} ms; with A's plan of ${A_SIZE} and ${CALLS} hanging calls median ${round(median(noisy))} ms; ratio ${ratio}x (target ≤ 1.5x)`,
    `  each run beside A / median alone: ${perRun.map((r) => `${r}x`).join(', ')}; within 1.5x: ${perRun.filter((r) => r <= 1.5).length} of ${perRun.length}; A still running at B's end: ${aThroughout.filter(Boolean).length} of ${aThroughout.length}`,
    `/health: alone p50 ${healthAlone.p50Ms} ms, p99 ${healthAlone.p99Ms} ms; with A p50 ${healthNoisy.p50Ms} ms, p99 ${healthNoisy.p99Ms} ms, max ${healthNoisy.maxMs} ms`,
    `A's calls held by the endpoint at once: at most ${o.endpoint.heldMax()} (its share 5)`,
  ];
  return { report, lines };
}
