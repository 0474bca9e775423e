import { Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { callsTaskQueue } from '../../workflows/task-queues.js';
import type { InstanceExecutionInput } from '../../workflows/instance-execution.js';
import { localActivities } from '../support/plans.js';

/**
 * The instance workflow's side of a call made inline (workflows/instance-execution.ts, patch
 * `instance-inline-calls`) and of a local step under a resilience strategy, on the real Temporal server with its
 * real workflow code. The activities are fakes at
 * the workflow's boundary (what a step answers, what a call answers): what is under test is what the workflow does
 * with those answers, which the service's own activities cannot be made to give on demand (a preparation that keeps
 * failing inside the task, a run of an earlier level).
 */
let nativeConnection: NativeConnection;
let connection: Connection;
let client: Client;
const run = Math.random().toString(36).slice(2, 8);

beforeAll(async () => {
  nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection, namespace: 'default' });
});
afterAll(async () => {
  await connection?.close();
  await nativeConnection?.close();
});

/** A call made, its endpoint answering 200. */
const ANSWERED = {
  made: true,
  details: {
    instanceId: 'i',
    recordId: 'r',
    activityId: 'call',
    activityType: 'Elsa.Http.SendHttpRequest',
    connectionName: 'c',
  },
  outcome: { ok: true, status: 200 },
};

const standing = (status: string, subStatus: string) => ({
  definitionId: 'd',
  version: 1,
  tenantId: null,
  status,
  subStatus,
  waitingOn: [],
});

/**
 * Runs one instance workflow whose step starts a call (marked `inline` or not) to its end, with a main worker
 * and a calls worker on task queues of its own; `localCall` answers the call when made inside the task.
 */
async function runCall(name: string, o: { patchLevel: number; inline: boolean; localCall: () => Promise<unknown> }) {
  const taskQueue = `inline-${name}-${run}`;
  const made: ('local' | 'queued')[] = [];
  const callOutbound = async () => {
    if (Context.current().info.isLocal) {
      made.push('local');
      return o.localCall();
    }
    made.push('queued');
    return ANSWERED;
  };
  const activities = {
    executeInstanceStep: async () => ({
      hasMoreWork: true,
      instance: standing('Running', 'Executing'),
      call: { recordId: 'r', activityId: 'call', tenantKey: '', ...(o.inline ? { inline: true } : {}) },
    }),
    finishOutboundCall: async () => ({
      hasMoreWork: false,
      instance: standing('Finished', 'Finished'),
      executedActivityId: 'call',
    }),
    callOutbound,
  };
  const workflows = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: { codePath: inject('workflowBundlePath') },
    activities,
    shutdownGraceTime: '1 second',
  });
  const calls = await Worker.create({
    connection: nativeConnection,
    taskQueue: callsTaskQueue(taskQueue),
    activities: { callOutbound },
    shutdownGraceTime: '1 second',
  });
  const input: InstanceExecutionInput = {
    instanceId: `i-${name}-${run}`,
    told: { revision: 1, status: 'Running', subStatus: 'Pending', version: 1, hasWork: true, waitingOn: [] },
    patchLevel: o.patchLevel,
  };
  return { ...(await runToEnd([workflows, calls], taskQueue, input)), made };
}

/** Runs `workers` until the instance workflow started on `taskQueue` with `input` ends: its result and history. */
async function runToEnd(workers: Worker[], taskQueue: string, input: InstanceExecutionInput) {
  const running = Promise.all(workers.map((w) => w.run()));
  try {
    const handle = await client.workflow.start('instanceExecution', {
      taskQueue,
      workflowId: taskQueue,
      args: [input],
    });
    const result = (await handle.result()) as { instance: string };
    const { events } = await handle.fetchHistory();
    return { result, events: events! };
  } finally {
    for (const w of workers) w.shutdown();
    await running;
  }
}

describe('a call its step marked inline', () => {
  it('is made inside the workflow task by a run of patch level 3, without asking patched()', async () => {
    const { result, made, events } = await runCall('level3', {
      patchLevel: 3,
      inline: true,
      localCall: async () => ANSWERED,
    });
    expect(result.instance).toBe('Finished/Finished');
    expect(made).toEqual(['local']);
    expect(localActivities(events)).toEqual(['executeInstanceStep', 'callOutbound', 'finishOutboundCall']);
    expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
    expect(events.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? [])).not.toContain('core_patch');
  });

  it('is made inside the task by a run of level 2 still open at the upgrade, which records the patch', async () => {
    const { result, made, events } = await runCall('level2', {
      patchLevel: 2,
      inline: true,
      localCall: async () => ANSWERED,
    });
    expect(result.instance).toBe('Finished/Finished');
    expect(made).toEqual(['local']);
    expect(events.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? [])).toContain('core_patch');
    // It replays as it ran.
    await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, { events }, 'level2');
  });

  it('of a run of level 2 whose step did not mark it inline goes through the calls queue, asking nothing', async () => {
    const { made, events } = await runCall('level2-queued', {
      patchLevel: 2,
      inline: false,
      localCall: async () => {
        throw new Error('not made inside the task');
      },
    });
    expect(made).toEqual(['queued']);
    expect(events.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? [])).not.toContain('core_patch');
  });

  it('that keeps failing inside the task goes on through the calls task queue', async () => {
    const { result, made, events } = await runCall('failing', {
      patchLevel: 3,
      inline: true,
      localCall: async () => {
        throw new Error('the database is away');
      },
    });
    expect(result.instance).toBe('Finished/Finished');
    // Five attempts inside the task (1, 2, 4, 8 s apart), then one activity task of the calls queue.
    expect(made).toEqual(['local', 'local', 'local', 'local', 'local', 'queued']);
    const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes);
    expect(scheduled.map((e) => e.activityTaskScheduledEventAttributes!.taskQueue!.name)).toEqual([
      callsTaskQueue(`inline-failing-${run}`),
    ]);
  }, 60_000);
});

describe('a local step under a resilience strategy', () => {
  it("whose strategy's attempts run out is run once more as final, the workflow going on", async () => {
    const taskQueue = `strategy-${run}`;
    const asked: string[] = [];
    const activities = {
      executeInstanceStep: async (_id: string, options: { finalAttempt?: boolean; plainOnly?: boolean }) => {
        if (options.plainOnly) {
          asked.push('first');
          // The first step ran; the next one's activity names a strategy of two quick attempts.
          return {
            hasMoreWork: true,
            instance: standing('Running', 'Executing'),
            executedActivityId: 'first',
            nextRetry: { maximumAttempts: 2, initialIntervalMs: 100, backoffCoefficient: 1, maximumIntervalMs: 100 },
          };
        }
        if (!options.finalAttempt) {
          asked.push('under the strategy');
          throw new Error('the database is away');
        }
        asked.push('final');
        return { hasMoreWork: false, instance: standing('Finished', 'Finished'), executedActivityId: 'second' };
      },
    };
    const worker = await Worker.create({
      connection: nativeConnection,
      taskQueue,
      workflowBundle: { codePath: inject('workflowBundlePath') },
      activities,
      shutdownGraceTime: '1 second',
    });
    const input: InstanceExecutionInput = {
      instanceId: `i-strategy-${run}`,
      told: { revision: 1, status: 'Running', subStatus: 'Pending', version: 1, hasWork: true, waitingOn: [] },
      patchLevel: 3,
    };
    const { result } = await runToEnd([worker], taskQueue, input);
    expect(asked).toEqual(['first', 'under the strategy', 'under the strategy', 'final']);
    expect(result.instance).toBe('Finished/Finished');
  }, 30_000);
});
