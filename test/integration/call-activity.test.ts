import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallResult, createCallActivities } from '../../activities/calls.js';
import { createConfigCipher } from '../../src/connections/cipher.js';
import { createLogger } from '../../src/logger.js';
import { TenantCounter } from '../../src/shares.js';
import { createHarness, type Harness } from '../support/harness.js';
import { seedInstances } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * The calls task queue's activity, run alone (Temporal's mock activity environment) on a real database:
 * an error no retry can fix while preparing a call faults the step instead of being retried forever, and
 * the tenant's share is given back on every path.
 */
let h: Harness;
let instanceId: string;
let recordId: string;

beforeAll(async () => {
  h = await createHarness({ worker: false });
  const def = await h.request('POST', '/workflow-definitions', { body: approvalWithNote('call-prep') });
  const seeded = await seedInstances(h.pool, { definitionVersionId: def.body.id, count: 1, subStatus: 'Executing' });
  instanceId = seeded[0]!;
  const { rows } = await h.pool.query<{ id: string }>(
    `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, status, started_at)
     VALUES ($1, '', 'start', 'flow1:start', 'Elsa.Http.SendHttpRequest', 'Running', now()) RETURNING id::text`,
    [instanceId],
  );
  recordId = rows[0]!.id;
});
afterAll(() => h?.close());

const activities = (calls: TenantCounter, definitions: unknown) =>
  createCallActivities({
    pool: h.workerPool,
    definitions: definitions as never,
    logger: createLogger('silent'),
    cipher: createConfigCipher(undefined),
    calls,
  });

describe('callOutbound', () => {
  it('turns an error no retry can fix into a failed call (the step faults with it), giving the share back', async () => {
    const calls = new TenantCounter(1, 10);
    const broken = { byVersionId: () => Promise.reject(new Error('the definition cache is broken')) };
    const result: CallResult = await new MockActivityEnvironment().run(activities(calls, broken).callOutbound, {
      instanceId,
      recordId,
      tenantKey: '',
      activityId: 'start',
    });
    expect(result.made).toBe(false);
    expect(result.details.activityId).toBe('start');
    expect(result.outcome).toEqual({
      ok: false,
      error: 'the call could not be prepared: the definition cache is broken',
    });
    expect(calls.tryTake('')).toBe('taken');
  });

  it('turns a call over its tenant share back before any query, to come again later', async () => {
    const calls = new TenantCounter(1, 10);
    expect(calls.tryTake('busy')).toBe('taken');
    const failing = { byVersionId: () => Promise.reject(new Error('must not be reached')) };
    await expect(
      new MockActivityEnvironment().run(activities(calls, failing).callOutbound, {
        instanceId,
        recordId,
        tenantKey: 'busy',
      }),
    ).rejects.toMatchObject({
      type: 'TenantOutboundShareFull',
      nextRetryDelay: expect.anything(),
      // An expected condition: the SDK logs it at debug and counts no failure.
      category: 'BENIGN',
    });
  });

  it('answers a turn-back as a result for a workflow that asks again itself, so that no attempt is spent', async () => {
    const calls = new TenantCounter(1, 10);
    expect(calls.tryTake('busy')).toBe('taken');
    const failing = { byVersionId: () => Promise.reject(new Error('must not be reached')) };
    const result: CallResult = await new MockActivityEnvironment().run(activities(calls, failing).callOutbound, {
      instanceId,
      recordId,
      tenantKey: 'busy',
      activityId: 'start',
      turnBack: 'result' as const,
    });
    expect(result.made).toBe(false);
    expect(result.askAgainInMs).toBeGreaterThan(0);
    expect(result.outcome).toMatchObject({ ok: false, error: expect.stringContaining('TENANT_OUTBOUND_CALLS') });
  });
});
