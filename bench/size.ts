/**
 * One size of the plans bench (`npm run bench`, bench/run.ts), in a child process of its own: the service in
 * process on a fresh database, N instances seeded, the plan measured, checked and reverted, then the raw
 * UPDATE floor and the dry-run. Its parts are in bench/size/.
 */
import { writeFile } from 'node:fs/promises';
import { loadConfig } from '../src/config.js';
import { tuneHeapGrowth } from '../src/memory.js';
import { planHistory } from './history.js';
import {
  activityBreakdown,
  activityRecords,
  sqlStats,
  sqlTable,
  startSampling,
  walLsn,
  walMbSince,
} from './instrument.js';
import type { SizeResult } from './report.js';
import { dryRuns } from './size/dry-run.js';
import { rawUpdate } from './size/floor.js';
import { revertPlan, runPlan, verifyPlan, warmUp } from './size/plan.js';
import { seed, startBenchService } from './size/service.js';
import { COLD, DEFINITION_ID, FRESH_PAGES, RECORD_UNDO, WAIT_VIA, WARMUP_N } from './size/settings.js';
import { mb, RANDOM_IDS, round, stat } from './util.js';

export async function runSize(n: number): Promise<SizeResult> {
  const log = (msg: string) => process.stdout.write(`[bench N=${n}] ${msg}\n`);
  const { config, service, benchPool, api, key, stop } = await startBenchService(n);
  try {
    const seedMs = await seed(api, benchPool, n);
    log(`seeded ${n} instances in ${round(seedMs / 1000, 2)} s`);

    const filter = { definitionIds: [DEFINITION_ID] };
    // A worker runs its first plan with cold workflow code (~165 ms to load it into the workflow thread);
    // a service that has been up has run plans before. BENCH_COLD=1 measures the first plan instead.
    if (!COLD) log(`warm-up plan over ${WARMUP_N} other instances in ${round(await warmUp(api, benchPool), 0)} ms`);
    activityRecords.length = 0;
    sqlStats.worker.clear();
    sqlStats.api.clear();
    const walBeforePlan = await walLsn(benchPool);
    const sampling = startSampling();
    const plan = await runPlan(api, filter);
    const sampled = sampling.stop();
    const walPlan = await walMbSince(benchPool, walBeforePlan);
    log(
      `plan ${plan.planId} completed in ${round(plan.planMs / 1000, 2)} s (${Math.round(n / (plan.planMs / 1000))} instances/s)`,
    );
    const { planRow, verified } = await verifyPlan(benchPool, plan.planId, n);
    if (!verified.ok) log(`VERIFICATION FAILED: ${JSON.stringify(verified)}`);
    const temporal = await planHistory(
      service.client,
      plan.planId,
      Math.min(config.alterations.window, config.database.batchSlots),
    );
    const workerSql = sqlTable(sqlStats.worker);
    const apiSql = sqlTable(sqlStats.api);
    // The plan's activities only (the revert plan below runs batches too).
    const activities = activityBreakdown();

    const undo = await revertPlan(api, benchPool, plan.planId, n);
    log(
      `before-images ${RECORD_UNDO ? `${undo.bytesPerJob} bytes/job` : 'off'}` +
        (undo.revert ? `; revert in ${round(undo.revert.ms / 1000, 2)} s (${undo.revert.instancesPerSecond}/s)` : ''),
    );
    const raw = await rawUpdate(benchPool, n);
    log(`raw UPDATE in ${round(raw.ms / 1000, 2)} s (median of ${raw.result.runsMs.length})`);
    const dryRun = await dryRuns(api, benchPool, filter, n, { app: service.app!, key });
    log(
      `dry-run median ${dryRun.medianMs} ms (${dryRun.count} ids); over HTTP from another process ${dryRun.overHttp?.medianMs} ms, countOnly ${dryRun.overHttp?.countOnlyMedianMs} ms`,
    );

    return {
      n,
      recordUndo: RECORD_UNDO,
      freshPages: FRESH_PAGES,
      randomIds: RANDOM_IDS,
      undo,
      seedMs: round(seedMs),
      plan: {
        planId: plan.planId,
        ms: round(plan.planMs),
        submitMs: round(plan.submitMs),
        instancesPerSecond: Math.round(n / (plan.planMs / 1000)),
        serverSide: {
          createdToStartedMs: planRow.started.getTime() - planRow.created.getTime(),
          createdToCompletedMs: planRow.completed.getTime() - planRow.created.getTime(),
        },
        verified,
        watch: { via: WAIT_VIA, ...stat(plan.reads) },
      },
      raw: raw.result,
      ratio: round(plan.planMs / raw.ms, 2),
      dryRun,
      memory: { ...sampled.memory, maxRssAtEndMb: mb(process.resourceUsage().maxRSS * 1024) },
      temporal,
      breakdown: {
        activities,
        workerSql,
        apiSql,
        cpu: sampled.cpu,
        walMb: { plan: walPlan, raw: raw.walMb },
        eventLoopDelay: sampled.eventLoopDelay,
      },
    };
  } finally {
    await stop();
  }
}

/**
 * BENCH_ONLY=dry-run: seed N instances and measure the dry-run alone (streamed ids and countOnly), for the
 * 1,000,000-id figure without the hour a 1M plan, its revert and three raw UPDATEs take.
 */
export async function runDryRunOnly(
  n: number,
): Promise<{ n: number; seedMs: number; dryRun: Awaited<ReturnType<typeof dryRuns>> }> {
  const { service, benchPool, api, key, stop } = await startBenchService(n);
  try {
    const seedMs = await seed(api, benchPool, n);
    const dryRun = await dryRuns(api, benchPool, { definitionIds: [DEFINITION_ID] }, n, { app: service.app!, key });
    process.stdout.write(
      `[bench N=${n}] dry-run median ${dryRun.medianMs} ms of ${dryRun.runsMs.join(' / ')} (${dryRun.count} ids); countOnly median ${dryRun.countOnlyMedianMs} ms\n` +
        `[bench N=${n}] over HTTP from another process: dry-run median ${dryRun.overHttp?.medianMs} ms of ${dryRun.overHttp?.runsMs.join(' / ')}; countOnly median ${dryRun.overHttp?.countOnlyMedianMs} ms of ${dryRun.overHttp?.countOnlyMs.join(' / ')}\n`,
    );
    return { n, seedMs: round(seedMs), dryRun };
  } finally {
    await stop();
  }
}

export async function child(): Promise<void> {
  // As src/main.ts does at start (HEAP_GROWING_PERCENT).
  tuneHeapGrowth(loadConfig().heapGrowingPercent);
  const n = Number(process.env.BENCH_CHILD_SIZE);
  const result = process.env.BENCH_ONLY === 'dry-run' ? await runDryRunOnly(n) : await runSize(n);
  await writeFile(process.env.BENCH_RESULT_FILE!, JSON.stringify(result));
}
