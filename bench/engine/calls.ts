/**
 * Phase d, on both sides: instances whose one step calls the bench's local endpoint, started to done. The bare
 * workflows' regular activity calls it; the service's instances run a Send HTTP Request step through a saved
 * connection, within the tenant's outbound share.
 */
import type { Client } from '@temporalio/client';
import type pg from 'pg';
import { cpuMark } from '../engine-procs.js';
import { HTTP_CONNECTION_TYPE, oneCallDefinition } from '../util.js';
import { type Context, cpuOf, fire, queryCount, quiet, reach } from './measure.js';
import type { api } from './service.js';
import {
  BASELINE_CALL_TYPE,
  BASELINE_QUEUE,
  CALL_CONNECTION,
  CALL_DEFINITION_ID,
  CALL_N,
  CLIENTS,
  log,
  POLL_MS,
  WAIT_MS,
  WARMUP,
} from './settings.js';

/** d. CALL_N bare workflows, each one regular activity calling the endpoint, then its row written. */
export async function baselineCalls(ctx: Context, db: pg.Client, client: Client, run: string) {
  await db.query('TRUNCATE baseline_instances');
  const url = `${ctx.endpoint.url}/baseline`;
  const start = (prefix: string) => async (i: number) => {
    const id = `engine-baseline-call-${run}-${prefix}-${i}`;
    await client.workflow.start(BASELINE_CALL_TYPE, { workflowId: id, taskQueue: BASELINE_QUEUE, args: [id, url] });
  };
  const rows = () => queryCount(db, 'SELECT count(*) AS n FROM baseline_instances');
  if (WARMUP > 0) {
    const t = performance.now();
    await fire(WARMUP, CLIENTS, start('warm'));
    await reach('baseline d warm-up: rows', t, WARMUP, rows, { pollMs: POLL_MS, timeoutMs: 120_000, required: true });
    await db.query('TRUNCATE baseline_instances');
  }
  log(`baseline d: ${CALL_N} workflows with one activity calling ${url}, by ${CLIENTS} concurrent starters`);
  const calls0 = ctx.endpoint.calls();
  const cpu = cpuMark();
  const t0 = performance.now();
  const [starts, done] = await Promise.all([
    fire(CALL_N, CLIENTS, start('d')),
    reach('baseline d: calls made and rows written', t0, CALL_N, rows, {
      pollMs: POLL_MS,
      timeoutMs: WAIT_MS,
      required: true,
    }),
  ]);
  const split = cpuOf(ctx, cpu);
  await quiet(ctx, 'baseline d', t0);
  const calls = ctx.endpoint.calls() - calls0;
  log(
    `baseline d: ${starts.perSecond} starts/s; all ${CALL_N} called and written after ${done.ms} ms (${done.perSecond}/s); endpoint answered ${calls}`,
  );
  return { starts, done, endpointCalls: calls, cpu: split };
}

/** d. CALL_N instances whose one step is a Send HTTP Request to the endpoint, until all are Finished. */
export async function serviceCalls(ctx: Context, call: ReturnType<typeof api>, db: pg.Client) {
  await call('POST', '/connection-configuration', {
    name: CALL_CONNECTION,
    connectionType: HTTP_CONNECTION_TYPE,
    connectionConfiguration: { baseUrl: ctx.endpoint.url },
  });
  await call('POST', '/workflow-definitions', {
    ...oneCallDefinition(CALL_DEFINITION_ID, CALL_CONNECTION, 'POST', '/service'),
    name: 'Engine bench: one outbound call',
  });
  const finished = () =>
    queryCount(db, `SELECT count(*) AS n FROM workflow_instances WHERE definition_id = $1 AND status = 'Finished'`, [
      CALL_DEFINITION_ID,
    ]);
  const start = async () => {
    await call('POST', '/workflow-instances', { definitionId: CALL_DEFINITION_ID });
  };
  if (WARMUP > 0) {
    const t = performance.now();
    await fire(WARMUP, CLIENTS, start);
    await reach('service d warm-up: Finished', t, WARMUP, finished, {
      pollMs: POLL_MS,
      timeoutMs: 120_000,
      required: true,
    });
    await quiet(ctx, 'service d warm-up', t);
  }
  log(`service d: ${CALL_N} instances of one Send HTTP Request step, by ${CLIENTS} concurrent clients`);
  const before = await finished();
  const calls0 = ctx.endpoint.calls();
  ctx.serviceSampler.phase('d');
  const cpu = cpuMark();
  const t0 = performance.now();
  const [starts, done] = await Promise.all([
    fire(CALL_N, CLIENTS, start),
    reach('service d: called and Finished', t0, CALL_N, async () => (await finished()) - before, {
      pollMs: POLL_MS,
      timeoutMs: WAIT_MS,
      required: true,
    }),
  ]);
  const split = cpuOf(ctx, cpu);
  await quiet(ctx, 'service d', t0);
  ctx.serviceSampler.phase(undefined);
  const calls = ctx.endpoint.calls() - calls0;
  const faulted = await queryCount(
    db,
    `SELECT count(*) AS n FROM workflow_instances WHERE definition_id = $1 AND sub_status = 'Faulted'`,
    [CALL_DEFINITION_ID],
  );
  log(
    `service d: ${starts.perSecond} accepted/s; all ${CALL_N} called and Finished after ${done.ms} ms (${done.perSecond}/s); endpoint answered ${calls}; faulted ${faulted}`,
  );
  return { starts, done, endpointCalls: calls, faulted, cpu: split };
}
