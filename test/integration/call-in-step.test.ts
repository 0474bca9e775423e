import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callArgs } from '../../activities/call-args.js';
import { type CallResult, createCallMaker } from '../../activities/calls.js';
import { createActivities } from '../../activities/index.js';
import { createConfigCipher } from '../../src/connections/cipher.js';
import { finishOutboundCall, type ReadyCall, runStep, type StepResult } from '../../src/engine/executor.js';
import { lockInstanceAndRecord } from '../../src/engine/instance-state.js';
import { createLogger } from '../../src/logger.js';
import { TenantCounter } from '../../src/shares.js';
import { HTTP_CONNECTION_TYPE } from '../../src/vocabulary/descriptors.js';
import { createHarness, type Harness } from '../support/harness.js';
import { countingPool } from '../support/pools.js';
import { chain, lit, writeLine } from '../support/workflows.js';

/**
 * A call made by the step that started it (activities/index.ts, `callInStep`), its parts run as the step runs them,
 * on a real database and a local endpoint: the call goes out as the step had it, nothing read back; its claim is
 * given back by the statement that locks the instance for the outcome; its claim, made once it has its tenant's
 * place, checks that the call is still out: one an alteration closed while it waited is not made; its outcome's
 * recording, failed for a moment, is tried again in the step, and the call is not made again.
 */
let h: Harness;
let server: Server;
/** The requests `server` received: method, path and Idempotency-Key. */
const received: string[] = [];
const logger = createLogger('silent');
const cipher = createConfigCipher(undefined);

beforeAll(async () => {
  h = await createHarness({ worker: false });
  server = createServer((req, res) => {
    received.push(`${req.method} ${req.url} ${String(req.headers['idempotency-key'])}`);
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const made = await h.request('POST', '/connection-configuration', {
    body: {
      name: 'in-step',
      connectionType: HTTP_CONNECTION_TYPE,
      connectionConfiguration: { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
    },
  });
  expect(made.status).toBe(201);
  const call = {
    id: 'call',
    type: 'Elsa.Http.SendHttpRequest',
    version: 1,
    connection: {
      typeName: `ConnectionProperties<${HTTP_CONNECTION_TYPE}>`,
      expression: { type: 'Literal', value: { connectionName: 'in-step' } },
    },
    method: lit('POST'),
    path: lit('/orders'),
  };
  const body = chain('in-step', [writeLine('start', 'started'), call, writeLine('end', 'called')]);
  expect((await h.request('POST', '/workflow-definitions', { body })).status).toBe(201);
  // The same, through a connection that answers within the worker's bound for calls made inside a workflow task:
  // its calls are marked inline, for the step to make.
  const inline = await h.request('POST', '/connection-configuration', {
    body: {
      name: 'in-step-inline',
      connectionType: HTTP_CONNECTION_TYPE,
      connectionConfiguration: {
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        timeoutMs: 2_000,
      },
    },
  });
  expect(inline.status).toBe(201);
  const inlineCall = {
    ...call,
    connection: { ...call.connection, expression: { type: 'Literal', value: { connectionName: 'in-step-inline' } } },
  };
  const inlineBody = chain('in-step-inline', [writeLine('start', 'started'), inlineCall, writeLine('end', 'called')]);
  expect((await h.request('POST', '/workflow-definitions', { body: inlineBody })).status).toBe(201);
});
afterAll(async () => {
  server?.close();
  await h?.close();
});

/** A new instance whose step has started its call: the step's answer and the call as the step had it. */
async function startedCall(): Promise<{
  id: string;
  recordId: string;
  args: ReturnType<typeof callArgs>;
  ready: ReadyCall;
}> {
  const id = (await h.request('POST', '/workflow-instances', { body: { definitionId: 'in-step' } })).body
    .workflowInstanceId as string;
  let ready: ReadyCall | undefined;
  const step = await runStep({ pool: h.workerPool, definitions: h.definitions, logger, cipher }, id, {
    callsApart: true,
    ownWorkflow: true,
    onCallReady: (c) => {
      ready = c;
    },
  });
  expect(step.call).toBeDefined();
  // The connection's configuration stays in the process: the step's answer (the workflow's history) has none.
  expect(JSON.stringify(step)).not.toContain('127.0.0.1');
  return { id, recordId: step.call!.recordId, args: callArgs(id, step.call!, 'result', true), ready: ready! };
}

const claims = async (recordId: string) =>
  (await h.pool.query<{ claim: string }>('SELECT claim FROM outbound_calls_out WHERE record_id = $1', [recordId])).rows;

describe('a call made by its step', () => {
  it('goes out as the step had it, claimed in one statement; its claim is given back with its outcome', async () => {
    const { id, recordId, args, ready } = await startedCall();
    const db = countingPool(h.workerPool);
    const makeCall = createCallMaker({
      pool: db.pool,
      definitions: h.definitions,
      logger,
      cipher,
      outbound: { allowNetworks: ['127.0.0.0/8'] },
      calls: new TenantCounter(5, 50, 12),
    });
    const made: CallResult = await new MockActivityEnvironment().run(makeCall, args, ready);
    expect(made).toMatchObject({ made: true, outcome: { ok: true, status: 200 } });
    expect(received).toContain(`POST /orders ${id}:${recordId}`);
    // Nothing read back (no instance, record or connection), and the claim kept for the outcome's recording.
    expect(db.statements).toHaveLength(1);
    expect(db.statements[0]).toMatch(/^\s*INSERT INTO outbound_calls_out/);
    expect(db.connections()).toBe(0);
    expect(await claims(recordId)).toEqual([{ claim: made.claim }]);

    // Its lock for the outcome gives the claim back; rolled back, it is still held.
    const client = await h.workerPool.connect();
    try {
      await client.query('BEGIN');
      await lockInstanceAndRecord(client, id, recordId, made.claim);
      expect(await claims(recordId)).toEqual([{ claim: made.claim }]);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await claims(recordId)).toEqual([{ claim: made.claim }]);
    const after = await finishOutboundCall(
      { pool: h.workerPool, definitions: h.definitions, logger, cipher },
      made.details,
      made.outcome,
      { ownWorkflow: true, claim: made.claim! },
    );
    expect(after.hasMoreWork).toBe(false);
    expect((await h.request('GET', `/workflow-instances/${id}`)).body).toMatchObject({
      status: 'Finished',
      subStatus: 'Finished',
    });
    expect(await claims(recordId)).toEqual([]);
  });

  it('after waiting in line for its tenant, claims only what is still out: closed meanwhile, it goes back unmade', async () => {
    const { id, recordId, args, ready } = await startedCall();
    // The tenant's one place is held: the call waits in the worker's line for it.
    const calls = new TenantCounter(1, 50, 12);
    expect(calls.tryTake(ready.tenantKey)).toBe('taken');
    const makeCall = createCallMaker({
      pool: h.workerPool,
      definitions: h.definitions,
      logger,
      cipher,
      outbound: { allowNetworks: ['127.0.0.0/8'] },
      calls,
    });
    const pending = new MockActivityEnvironment().run(makeCall, args, ready);
    for (let i = 0; i < 100 && calls.queued === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(calls.queued).toBe(1);
    // An alteration closes the call meanwhile (as a CancelActivity does); then the place frees.
    await h.pool.query(`UPDATE activity_records SET status = 'Canceled', completed_at = now() WHERE id = $1`, [
      recordId,
    ]);
    calls.give(ready.tenantKey);
    const made = (await pending) as CallResult;
    // Not made, nothing claimed: back to its workflow, which reads the call back and finds it closed.
    expect(made.made).toBe(false);
    expect(made.askAgainInMs).toBeGreaterThan(0);
    expect(received.filter((r) => r.endsWith(`${id}:${recordId}`))).toEqual([]);
    expect(await claims(recordId)).toEqual([]);
    // Its place given back: the next call of the tenant takes it at once.
    expect(calls.tryTake(ready.tenantKey)).toBe('taken');
  });

  it('is made once when the recording of its outcome fails for a moment: the step records it again', async () => {
    const id = (await h.request('POST', '/workflow-instances', { body: { definitionId: 'in-step-inline' } })).body
      .workflowInstanceId as string;
    // The first recording of the call's end fails as a serialization failure would (a transient error); the
    // sequence counts the tries, whatever the transaction that made them came to.
    // In one transaction: all of it, or none, is there to drop.
    await h.pool.query(`
      BEGIN;
      CREATE SEQUENCE record_tries;
      CREATE FUNCTION fail_first_recording() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.instance_id = ${pg.escapeLiteral(id)} AND NEW.activity_id = 'call' AND NEW.status <> OLD.status THEN
          IF nextval('record_tries') = 1 THEN
            RAISE EXCEPTION 'the test fails the first recording' USING ERRCODE = '40001';
          END IF;
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER fail_first_recording BEFORE UPDATE ON activity_records
        FOR EACH ROW EXECUTE FUNCTION fail_first_recording();
      COMMIT`);
    let tries: number;
    try {
      const deps = {
        pool: h.workerPool,
        definitions: h.definitions,
        logger,
        cipher,
        inlineCallMaxMs: 5_000,
        outbound: { allowNetworks: ['127.0.0.0/8'] },
      };
      const activities = createActivities({
        ...deps,
        callOutbound: createCallMaker({ ...deps, calls: new TenantCounter(5, 50, 12) }),
      });
      // The instance's own workflow runs its step as a local activity.
      const step: StepResult = await new MockActivityEnvironment({ isLocal: true }).run(
        activities.executeInstanceStep,
        id,
        { callsApart: true, ownWorkflow: true },
      );
      // Made and recorded in the step: nothing left for the workflow to call.
      expect(step.call).toBeUndefined();
    } finally {
      const { rows } = await h.pool.query<{ last_value: string }>(`SELECT last_value FROM record_tries`);
      tries = Number(rows[0]!.last_value);
      await h.pool.query(`
        DROP TRIGGER fail_first_recording ON activity_records;
        DROP FUNCTION fail_first_recording();
        DROP SEQUENCE record_tries`);
    }
    const { rows } = await h.pool.query<{ id: string }>(
      `SELECT id FROM activity_records WHERE instance_id = $1 AND activity_id = 'call'`,
      [id],
    );
    const recordId = rows[0]!.id;
    expect(tries).toBe(2);
    expect(received.filter((r) => r.endsWith(`${id}:${recordId}`))).toEqual([`POST /orders ${id}:${recordId}`]);
    expect((await h.request('GET', `/workflow-instances/${id}`)).body).toMatchObject({
      status: 'Finished',
      subStatus: 'Finished',
    });
    expect(await claims(recordId)).toEqual([]);
  });
});
