import type { Client } from '@temporalio/client';
import type { SizeResult } from './report.js';
import { round, sleep, stat } from './util.js';

// ---------------------------------------------------------------------------------------------------
// Temporal history of the plan's runs

export type HistoryEvent = Record<string, any>;
export const longToNumber = (v: unknown): number => (v == null ? 0 : typeof v === 'number' ? v : Number(String(v)));
export const eventMs = (e: HistoryEvent): number =>
  longToNumber(e.eventTime?.seconds) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;

/**
 * `slots`: how many batches of the plan can run at once, min(window, the batch worker's slots): a plan's
 * window of 4 on a 2-core machine's 2 batch slots (WORKER_BATCH_SLOTS) keeps 2 running and the rest queued,
 * so "busy" is measured against the 2.
 */
export async function planHistory(client: Client, planId: string, slots: number): Promise<SizeResult['temporal']> {
  const workflowId = `alteration-plan-${planId}`;
  // Visibility is eventually consistent: wait until the run that completed the plan is listed.
  let runs: { runId: string; status: string }[] = [];
  for (let attempt = 0; attempt < 100; attempt++) {
    runs = [];
    for await (const info of client.workflow.list({ query: `WorkflowId = "${workflowId}"` })) {
      runs.push({ runId: info.runId, status: info.status.name });
    }
    if (runs.some((r) => r.status === 'COMPLETED')) break;
    await sleep(100);
  }
  const historyEvents: number[] = [];
  const scheduleToStart: number[] = [];
  const startToClose: number[] = [];
  const workflowTasks: number[] = [];
  let phaseStart = Infinity;
  let phaseEnd = -Infinity;
  for (const run of runs) {
    const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    const events = (history.events ?? []) as HistoryEvent[];
    historyEvents.push(events.length);
    // BENCH_TIMELINE=1: the run's events with their time since the first, to see where a small plan's time goes.
    if (process.env.BENCH_TIMELINE === '1') {
      const t0 = eventMs(events[0] ?? {});
      for (const e of events)
        console.log(`[timeline] ${String(Math.round(eventMs(e) - t0)).padStart(6)} ms  ${String(e.eventType)}`);
    }
    const scheduled = new Map<string, { type: string; at: number }>();
    const started = new Map<string, number>();
    const wftScheduled = new Map<string, number>();
    for (const e of events) {
      const id = String(longToNumber(e.eventId));
      if (e.activityTaskScheduledEventAttributes) {
        scheduled.set(id, { type: e.activityTaskScheduledEventAttributes.activityType?.name ?? '?', at: eventMs(e) });
      } else if (e.activityTaskStartedEventAttributes) {
        started.set(String(longToNumber(e.activityTaskStartedEventAttributes.scheduledEventId)), eventMs(e));
      } else if (e.activityTaskCompletedEventAttributes) {
        const sid = String(longToNumber(e.activityTaskCompletedEventAttributes.scheduledEventId));
        const s = scheduled.get(sid);
        const st = started.get(sid);
        if (s?.type === 'runJobBatch' && st !== undefined) {
          scheduleToStart.push(st - s.at);
          startToClose.push(eventMs(e) - st);
          phaseStart = Math.min(phaseStart, s.at);
          phaseEnd = Math.max(phaseEnd, eventMs(e));
        }
      } else if (e.workflowTaskScheduledEventAttributes) {
        wftScheduled.set(id, eventMs(e));
      } else if (e.workflowTaskCompletedEventAttributes) {
        const at = wftScheduled.get(String(longToNumber(e.workflowTaskCompletedEventAttributes.scheduledEventId)));
        if (at !== undefined) workflowTasks.push(eventMs(e) - at);
      }
    }
  }
  const batchPhaseMs = phaseEnd > phaseStart ? phaseEnd - phaseStart : 0;
  const busy = startToClose.reduce((a, b) => a + b, 0);
  return {
    runs: runs.length,
    maxHistoryEvents: Math.max(0, ...historyEvents),
    historyEvents,
    batchScheduleToStart: stat(scheduleToStart),
    batchStartToClose: stat(startToClose),
    workflowTasks: stat(workflowTasks),
    windowUtilisation: batchPhaseMs > 0 ? round(busy / (slots * batchPhaseMs), 2) : 0,
    slots,
    batchPhaseMs: round(batchPhaseMs),
  };
}

/**
 * Where a plan's time went, from its Temporal history (batches: wait in queue, run), a line each to `log`
 * (the noisy bench's NOISY_TIMELINE=1).
 */
export async function logPlanTimeline(client: Client, planId: string, log: (msg: string) => void): Promise<void> {
  const history = await client.workflow.getHandle(`alteration-plan-${planId}`).fetchHistory();
  const events = (history.events ?? []) as HistoryEvent[];
  const t0 = eventMs(events[0] ?? {});
  const scheduled = new Map<string, number>();
  const started = new Map<string, number>();
  for (const e of events) {
    const id = String(longToNumber(e.eventId));
    const at = Math.round(eventMs(e) - t0);
    if (e.activityTaskScheduledEventAttributes) scheduled.set(id, at);
    else if (e.activityTaskStartedEventAttributes)
      started.set(String(longToNumber(e.activityTaskStartedEventAttributes.scheduledEventId)), at);
    else if (e.activityTaskCompletedEventAttributes) {
      const sid = String(longToNumber(e.activityTaskCompletedEventAttributes.scheduledEventId));
      log(
        `  batch scheduled ${scheduled.get(sid)} ms, waited ${started.get(sid)! - scheduled.get(sid)!} ms, ran ${at - started.get(sid)!} ms`,
      );
    } else if (e.workflowTaskStartedEventAttributes) {
      log(`  workflow task started at ${at} ms`);
    } else if (e.markerRecordedEventAttributes) {
      log(`  marker (a local activity or a patch) at ${at} ms`);
    }
  }
  log(`  last event at ${Math.round(eventMs(events[events.length - 1] ?? {}) - t0)} ms`);
}
