import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateJobs } from '../../src/alterations/generation.js';
import { completePlan, type ProcessingDeps, runJobBatch } from '../../src/alterations/processing.js';
import { AlterationSchema } from '../../src/alterations/model.js';
import { rememberVersions, versionOutcomes } from '../../src/alterations/set-based.js';
import { TimeSlice } from '../../src/vocabulary/time-slice.js';
import { createHarness, eventually, type Harness } from '../support/harness.js';
import { seedInstances, withoutWorkflows } from '../support/seed.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * A plan that only sets variables runs its batches as one statement in Postgres (src/alterations/set-based.ts)
 * (its first batch reads its instances' definition versions first; a later one that meets another version learns
 * it from its statement and sends it again). What it writes must be what the
 * batch in node writes: each case here runs the same plan over two identical sets of instances, one with batches
 * as they run in the service, one with every batch in node, at the same clock, and compares instance by instance
 * and job by job. The statements each batch sent are recorded, so that a case fails if the path it is about was
 * not the one taken.
 */
let h: Harness;
let version: string;
let otherVersion: string;
let seq = 0;
const AT = new Date('2026-11-27T10:00:00.123Z');
// Stored at the microsecond: node reads it at the millisecond, and the before-image says so.
const SEEDED_AT = '2026-01-02 03:04:05.678901+00';

beforeAll(async () => {
  h = await createHarness({ worker: false });
  version = (await h.request('POST', '/workflow-definitions', { body: approvalWithNote('set-based-a') })).body.id;
  // Another definition whose `note` is a number: setting it to text fails there.
  const other = approvalWithNote('set-based-b');
  other.variables[1] = { id: 'note', name: 'Note', typeName: 'Int32' } as (typeof other.variables)[number];
  otherVersion = (await h.request('POST', '/workflow-definitions', { body: other })).body.id;
});
afterAll(() => h?.close());

/** A member of `target`, a method bound to it (the pool's own `query` calls its own `connect`). */
const bound = (target: object, key: string | symbol) => {
  const value: unknown = Reflect.get(target, key, target);
  return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
};

/** Deps whose every statement is recorded, batch by batch (`sent`). */
function recordingDeps(setBased: boolean): ProcessingDeps & { sent: string[][] } {
  const sent: string[][] = [];
  const pool = h.workerPool;
  const connect = async () => {
    const client = await pool.connect();
    const statements: string[] = [];
    sent.push(statements);
    return new Proxy(client, {
      get(target, key) {
        if (key !== 'query') return bound(target, key);
        return (text: string | { text: string }, ...rest: unknown[]) => {
          statements.push(typeof text === 'string' ? text : text.text);
          return (target.query as (...a: unknown[]) => unknown).call(target, text, ...rest);
        };
      },
    });
  };
  const recording = new Proxy(pool, {
    get: (target, key) => (key === 'connect' ? connect : bound(target, key)),
  });
  return { pool: recording, definitions: h.definitions, clock: () => AT, setBased, sent };
}

const SET_BASED = /^WITH j AS/;
const INSTANCE_READ = /^SELECT id, tenant_id, definition_id, definition_version_id/;
const VERSIONS_READ = /^SELECT DISTINCT definition_version_id/;
/** The range's jobs read into node (the set-based statement reads them itself). */
const JOBS_READ = /^SELECT o\.ord, m\.instance_id/;
const took = (statements: string[], what: RegExp) => statements.some((s) => what.test(s.trim()));

/**
 * Two identical sets of `count` instances (the same variables by position, some without `note`, some with it
 * already "x", an undeclared `extra`), stored `updated_at` at the microsecond.
 */
async function twins(count: number, definitionVersionId = version) {
  const sets: string[][] = [];
  for (let k = 0; k < 2; k++) {
    const prefix = `sb${++seq}-`;
    const ids = await seedInstances(h.pool, {
      definitionVersionId,
      count,
      variables: { amount: 1, extra: 'kept' },
      namePrefix: prefix,
    });
    await withoutWorkflows(
      h.pool,
      `UPDATE workflow_instances w SET updated_at = $2,
              variables = CASE WHEN o.n % 3 = 0 THEN w.variables
                               WHEN o.n % 3 = 1 THEN w.variables || '{"note": "x"}'
                               ELSE w.variables || '{"note": "before", "amount": 7}' END
         FROM unnest($1::text[]) WITH ORDINALITY AS o(id, n) WHERE w.id = o.id`,
      [ids, SEEDED_AT],
    );
    sets.push(ids);
  }
  return sets as [string[], string[]];
}

async function plan(ids: string[], alterations: unknown[], deps: ProcessingDeps) {
  const r = await h.request('POST', '/alterations/submit', {
    body: { alterations, filter: { workflowInstanceIds: ids } },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  const planId = r.body.planId as string;
  expect((await generateJobs(deps, planId)).total).toBe(ids.length);
  return planId;
}

/** The plan's jobs that are not their set's instance at their ord, or lack the id and time they showed while Pending. */
async function mismatched(planId: string) {
  const { rows } = await h.pool.query(
    `SELECT j.ord FROM alteration_jobs j
       JOIN alteration_job_sets s ON s.plan_id = j.plan_id AND j.ord - s.first_ord BETWEEN 0 AND cardinality(s.instance_ids) - 1
      WHERE j.plan_id = $1
        AND (j.instance_id <> s.instance_ids[j.ord - s.first_ord + 1] OR j.created_at <> s.created_at
             OR j.id <> wfa_job_id(s.plan_id, s.created_at, j.ord))`,
    [planId],
  );
  return rows;
}

/** The plan's set cut again into rows of `size` ids, each generated a second after the one before. */
async function rechunk(planId: string, size: number) {
  await h.pool.query(
    `WITH old AS (DELETE FROM alteration_job_sets WHERE plan_id = $1 RETURNING *),
          flat AS (SELECT o.first_ord + m.k - 1 AS ord, m.id, o.created_at FROM old o, unnest(o.instance_ids) WITH ORDINALITY m(id, k))
     INSERT INTO alteration_job_sets (plan_id, first_ord, instance_ids, created_at)
     SELECT $1, ord / $2 * $2, array_agg(id ORDER BY ord), min(created_at) + (ord / $2) * interval '1 second'
       FROM flat GROUP BY ord / $2`,
    [planId, size],
  );
}

/** The batches `ranges`, one after the other; what each sent. */
async function runBatches(deps: ReturnType<typeof recordingDeps>, planId: string, ranges: [number, number][]) {
  const results = [];
  for (const [fromOrd, toOrd] of ranges) {
    const before = deps.sent.length;
    results.push({ result: await runJobBatch(deps, { planId, fromOrd, toOrd }), sent: deps.sent.slice(before).flat() });
  }
  return results;
}

/** The same plan over twin sets of `count`, generated, no batch run yet: `a` as the service runs it, `b` in node. */
async function twinPlans(count: number, alterations: unknown[]) {
  const [a, b] = await twins(count);
  const setBased = recordingDeps(true);
  const inNode = recordingDeps(false);
  return { a, b, setBased, inNode, pa: await plan(a, alterations, setBased), pb: await plan(b, alterations, inNode) };
}

/**
 * The same plan over twin sets, batch by batch over `ranges`: `a` as the service runs it, `b` with every batch in
 * node. What each batch returned and sent, for both.
 */
async function bothWays(a: string[], b: string[], alterations: unknown[], ranges: [number, number][]) {
  const setBased = recordingDeps(true);
  const inNode = recordingDeps(false);
  const pa = await plan(a, alterations, setBased);
  const pb = await plan(b, alterations, inNode);
  const ra = await runBatches(setBased, pa, ranges);
  const rb = await runBatches(inNode, pb, ranges);
  return { pa, pb, ra, rb, setBased, inNode };
}

/** What a user can see of the instances and of the plan's jobs, in the instances' order, without ids. */
async function observed(planId: string, ids: string[]) {
  const { rows: instances } = await h.pool.query(
    `SELECT revision, variables, status, sub_status, scheduled, bookmarks, updated_at
       FROM workflow_instances w JOIN unnest($1::text[]) WITH ORDINALITY AS o(id, n) ON o.id = w.id ORDER BY o.n`,
    [ids],
  );
  const { rows } = await h.pool.query(
    `SELECT j.ord, j.instance_id, j.status, j.log, j.undo, j.revision, j.created_at IS NOT NULL AS created,
            j.started_at, j.completed_at
       FROM alteration_jobs j WHERE j.plan_id = $1 ORDER BY j.ord`,
    [planId],
  );
  // A log names its instance: the same words with another id in the twin set.
  const jobs = rows.map(({ instance_id, log, ...job }) => ({
    ...job,
    log: log === null ? null : JSON.parse(JSON.stringify(log).replaceAll(instance_id, '(instance)')),
  }));
  const { rows: counts } = await h.pool.query(
    'SELECT from_ord, completed, failed FROM alteration_batch_counts WHERE plan_id = $1 ORDER BY from_ord',
    [planId],
  );
  return { instances, jobs, counts };
}

// Out of key order (the before-image lists variables in key order), one variable set twice, the second time as
// text converted to its type.
const setThree = [
  { type: 'ModifyVariable', variableId: 'note', value: 'x' },
  { type: 'ModifyVariable', variableId: 'amount', value: 7 },
  { type: 'ModifyVariable', variableId: 'amount', value: '9' },
];
const setAmount = [{ type: 'ModifyVariable', variableId: 'amount', value: 7 }];

describe('a plan that only sets variables', () => {
  it('writes in one statement what the batch in node writes: instances, jobs, before-images, counts', async () => {
    const [a, b] = await twins(60);
    const { pa, pb, ra, rb } = await bothWays(a, b, setThree, [
      [0, 20],
      [20, 40],
      [40, 60],
    ]);
    // All three ran set-based, without reading the instances into node, each in one statement: the first read its
    // instances' versions before it.
    expect(ra.map((r) => r.sent.filter((s) => SET_BASED.test(s.trim())).length)).toEqual([1, 1, 1]);
    expect(ra.map((r) => took(r.sent, VERSIONS_READ))).toEqual([true, false, false]);
    expect(ra.map((r) => [took(r.sent, SET_BASED), took(r.sent, INSTANCE_READ)])).toEqual([
      [true, false],
      [true, false],
      [true, false],
    ]);
    expect(rb.every((r) => !took(r.sent, SET_BASED) && took(r.sent, INSTANCE_READ))).toBe(true);
    // The statement read the batch's jobs from the plan's set itself; the batch in node reads them.
    expect(ra.map((r) => took(r.sent, JOBS_READ))).toEqual([false, false, false]);
    expect(rb.map((r) => took(r.sent, JOBS_READ))).toEqual([true, true, true]);
    expect(ra.map((r) => r.result)).toEqual(rb.map((r) => r.result));

    const oa = await observed(pa, a);
    const ob = await observed(pb, b);
    expect(oa).toEqual(ob);
    // Each job is its set's instance at its ord, with the id it showed while Pending (derived from its set).
    expect(await mismatched(pa)).toEqual([]);
    expect(oa.jobs).toHaveLength(60);
    // And what that is: amount 9, note "x", updated at the batch's time, one revision more; the before-image
    // holds updatedAt at the millisecond, then the variables that changed, in key order.
    expect(oa.instances[22]).toMatchObject({
      revision: 1,
      variables: { amount: 9, note: 'x', extra: 'kept' },
      updated_at: AT,
    });
    const updatedAt = ['/updatedAt', '2026-01-02T03:04:05.678Z'];
    expect(oa.jobs.slice(20, 23).map((j) => j.undo)).toEqual([
      [updatedAt, ['/variables/amount', 1], ['/variables/note']],
      [updatedAt, ['/variables/amount', 1]],
      [updatedAt, ['/variables/amount', 7], ['/variables/note', 'before']],
    ]);
    expect(oa.counts).toEqual([
      { from_ord: 0, completed: 20, failed: 0 },
      { from_ord: 20, completed: 20, failed: 0 },
      { from_ord: 40, completed: 20, failed: 0 },
    ]);
  });

  it('learns a version a later batch meets from its statement, and sends it again', async () => {
    const [a, b] = await twins(20);
    const [ao, bo] = await twins(10, otherVersion);
    const { pa, pb, ra, rb } = await bothWays([...a, ...ao], [...b, ...bo], setAmount, [
      [0, 20],
      [20, 30],
    ]);
    // The second batch's instances are of a version the first did not meet: its statement named it, wrote nothing,
    // and ran again with its outcome, still set-based.
    expect(ra.map((r) => r.sent.filter((s) => SET_BASED.test(s.trim())).length)).toEqual([1, 2]);
    expect(ra.map((r) => [took(r.sent, VERSIONS_READ), took(r.sent, INSTANCE_READ)])).toEqual([
      [true, false],
      [false, false],
    ]);
    expect(ra.map((r) => r.result)).toEqual(rb.map((r) => r.result));
    expect(await observed(pa, [...a, ...ao])).toEqual(await observed(pb, [...b, ...bo]));
  });

  it('works out a version it met already and where the plan fails once a batch, not again after the statement', async () => {
    const [a] = await twins(10);
    const [ao] = await twins(20, otherVersion);
    const deps = recordingDeps(true);
    const looked: number[] = [];
    const definitions = new Proxy(h.definitions, {
      get: (target, key) =>
        key === 'byVersionId'
          ? (...args: unknown[]) => {
              looked[looked.length - 1]!++;
              return (target.byVersionId as (...a: unknown[]) => unknown).apply(target, args);
            }
          : bound(target, key),
    });
    const planId = await plan([...a, ...ao], setThree.slice(0, 2), { ...deps, definitions });
    const batches = [];
    const ranges: [number, number][] = [
      [0, 10],
      [10, 20],
      [20, 30],
    ];
    for (const range of ranges) {
      looked.push(0);
      batches.push(...(await runBatches({ ...deps, definitions }, planId, [range])));
    }
    // The second batch met the other version (the plan fails there) and worked it out; the third, meeting it
    // again, works out both versions once, before its statement, and leaves the batch to node.
    expect(batches.map((r) => r.sent.filter((x) => SET_BASED.test(x.trim())).length)).toEqual([1, 1, 1]);
    expect(batches.map((r) => took(r.sent, INSTANCE_READ))).toEqual([false, true, true]);
    // Definition lookups per batch: the set-based path's (1; 1 + 2 once it met the other version; 2), and one
    // more in each batch left to node.
    expect(looked).toEqual([1, 4, 3]);
    expect(batches.map((r) => r.result.batch)).toEqual([
      { completed: 10, failed: 0, skipped: 0 },
      { completed: 0, failed: 10, skipped: 0 },
      { completed: 0, failed: 10, skipped: 0 },
    ]);
  });

  it('leaves to node a batch with a finished instance, one with scheduled work, one of a version it refuses: the same outcome', async () => {
    const [a, b] = await twins(40);
    const [ao, bo] = await twins(10, otherVersion);
    // In both sets alike: one finished instance and one with a step scheduled in the second batch's range.
    for (const ids of [a, b]) {
      await withoutWorkflows(
        h.pool,
        `UPDATE workflow_instances SET status = 'Finished', sub_status = 'Finished', finished_at = $2 WHERE id = $1`,
        [ids[25], SEEDED_AT],
      );
      await withoutWorkflows(
        h.pool,
        `UPDATE workflow_instances SET sub_status = 'Executing', scheduled = '["note"]', bookmarks = '[]' WHERE id = $1`,
        [ids[35]],
      );
    }
    const { pa, pb, ra, rb } = await bothWays([...a, ...ao], [...b, ...bo], setThree.slice(0, 2), [
      [0, 20],
      [20, 30],
      [30, 40],
      [40, 50],
    ]);
    // Batches 2 to 4 were tried set-based, declined (nothing written) and ran in node: a finished instance,
    // scheduled work, a version the plan had not met (and, once met, one where the plan fails).
    expect(ra.map((r) => [took(r.sent, SET_BASED), took(r.sent, INSTANCE_READ)])).toEqual([
      [true, false],
      [true, true],
      [true, true],
      [true, true],
    ]);
    expect(ra.map((r) => r.result)).toEqual(rb.map((r) => r.result));
    const oa = await observed(pa, [...a, ...ao]);
    const ob = await observed(pb, [...b, ...bo]);
    expect(oa).toEqual(ob);
    expect(oa.counts.map((c) => c.failed)).toEqual([0, 1, 0, 10]);
    expect(oa.jobs[25].log[0].message).toMatch(/is finished/);
    expect(oa.jobs[45].log.at(-1).message).toBe('Value is not a valid Int32 for variable note');
    // The scheduled step ran with the batch, in both.
    expect(oa.instances[35].scheduled).toEqual([]);
  });

  it('sets a variable named __proto__ as node does, and leaves to node an instance whose variables are not an object', async () => {
    const def = approvalWithNote('set-based-proto');
    def.variables.push({ id: '__proto__', name: 'Proto', typeName: 'String' } as (typeof def.variables)[number]);
    const protoVersion = (await h.request('POST', '/workflow-definitions', { body: def })).body.id as string;
    const [a, b] = await twins(4, protoVersion);
    for (const ids of [a, b]) {
      await withoutWorkflows(h.pool, `UPDATE workflow_instances SET variables = '[]' WHERE id = $1`, [ids[1]]);
      await withoutWorkflows(
        h.pool,
        `UPDATE workflow_instances SET variables = '{"__proto__": "old", "note": "n"}' WHERE id = $1`,
        [ids[2]],
      );
    }
    const alterations = [
      { type: 'ModifyVariable', variableId: '__proto__', value: 'new' },
      { type: 'ModifyVariable', variableId: 'note', value: 'x' },
    ];
    const { pa, pb, ra } = await bothWays(a, b, alterations, [
      [0, 2],
      [2, 4],
    ]);
    expect(ra.map((r) => [took(r.sent, SET_BASED), took(r.sent, INSTANCE_READ)])).toEqual([
      [true, true],
      [true, false],
    ]);
    const oa = await observed(pa, a);
    expect(oa).toEqual(await observed(pb, b));
    // As JSON: an object literal's `__proto__` would set its prototype, not a key.
    expect(oa.instances.map((i) => JSON.stringify(i.variables))).toEqual(
      [
        '{"note": "x", "extra": "kept", "amount": 1, "__proto__": "new"}',
        '{"note": "x", "__proto__": "new"}',
        '{"note": "x", "__proto__": "new"}',
        '{"note": "x", "extra": "kept", "amount": 1, "__proto__": "new"}',
      ].map((json) => JSON.stringify(JSON.parse(json))),
    );
    expect(oa.jobs[2]!.undo).toContainEqual(['/variables/__proto__', 'old']);
  });

  it('keeps the variables it does not set as stored, where the batch in node writes them back through its numbers', async () => {
    const [a, b] = await twins(4);
    await withoutWorkflows(
      h.pool,
      `UPDATE workflow_instances SET variables = variables || '{"big": 12345678901234567891}' WHERE id = ANY($1)`,
      [[...a, ...b]],
    );
    for (const [ids, deps] of [
      [a, recordingDeps(true)],
      [b, recordingDeps(false)],
    ] as const) {
      const planId = await plan(ids, setAmount, deps);
      expect(took((await runBatches(deps, planId, [[0, 4]]))[0]!.sent, SET_BASED)).toBe(deps.setBased);
    }
    const big = async (ids: string[]) =>
      (
        await h.pool.query<{ big: string }>(
          `SELECT variables->>'big' AS big FROM workflow_instances WHERE id = ANY($1::text[])`,
          [ids],
        )
      ).rows.map((x) => x.big);
    expect(await big(a)).toEqual(Array(4).fill('12345678901234567891'));
    expect(await big(b)).toEqual(Array(4).fill('12345678901234567000'));
  });

  it('waits for an instance another writer is changing and writes on top of what it committed: both changes kept', async () => {
    const [a] = await twins(20);
    const deps = recordingDeps(true);
    const planId = await plan(a, setAmount, deps);
    await runBatches(deps, planId, [[0, 10]]);
    const target = a[15]!;
    const other = await h.pool.connect();
    let batch: ReturnType<typeof runBatches> | undefined;
    try {
      await other.query('BEGIN');
      await other.query("SET LOCAL wfa.outbox = 'off'");
      await other.query(
        `UPDATE workflow_instances SET revision = revision + 1, variables = variables || '{"note":"by its step"}' WHERE id = $1`,
        [target],
      );
      batch = runBatches(deps, planId, [[10, 20]]);
      await eventually(async () => {
        const { rows } = await h.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH j AS%'`,
        );
        return rows[0]!.n > 0 ? true : undefined;
      }, 'the set-based statement waits on the changed row');
      await other.query('COMMIT');
    } finally {
      other.release();
    }
    const [{ result, sent }] = (await batch!) as unknown as [{ result: { batch: unknown }; sent: string[] }];
    expect(result.batch).toEqual({ completed: 10, failed: 0, skipped: 0 });
    expect([took(sent, SET_BASED), took(sent, INSTANCE_READ)]).toEqual([true, false]);
    const { rows } = await h.pool.query(
      `SELECT w.revision, w.variables->>'note' AS note, (w.variables->>'amount')::int AS amount, j.revision AS written,
              j.undo->1 AS undone
         FROM workflow_instances w JOIN alteration_jobs j ON j.instance_id = w.id AND j.plan_id = $2 WHERE w.id = $1`,
      [target, planId],
    );
    // The job's before-image is of the instance as the other writer left it (revision 1, amount as seeded).
    expect(rows[0]).toEqual({
      revision: 2,
      note: 'by its step',
      amount: 7,
      written: 2,
      undone: ['/variables/amount', 1],
    });
  });

  it('run twice at once over the same range (a retry while the first runs): each job and instance written once', async () => {
    const [a] = await twins(40);
    const deps = recordingDeps(true);
    const planId = await plan(a, setAmount, deps);
    await runBatches(deps, planId, [[0, 10]]);
    const attempts = await Promise.all([
      runJobBatch(deps, { planId, fromOrd: 10, toOrd: 40 }),
      runJobBatch(deps, { planId, fromOrd: 10, toOrd: 40, redispatch: true }),
    ]);
    expect(attempts.map((r) => r.processed).sort()).toEqual([0, 30]);
    expect(attempts.map((r) => r.batch)).toEqual([
      { completed: 30, failed: 0, skipped: 0 },
      { completed: 30, failed: 0, skipped: 0 },
    ]);
    const { rows } = await h.pool.query(
      `SELECT (SELECT count(*)::int FROM alteration_jobs WHERE plan_id = $1) AS jobs,
              (SELECT count(*)::int FROM workflow_instances WHERE id = ANY($2::text[]) AND revision = 1 AND variables->>'amount' = '7') AS once`,
      [planId, a],
    );
    expect(rows[0]).toEqual({ jobs: 40, once: 40 });
  });

  it('pairs each job with its instance over ranges that span sets generated at different times, as node does', async () => {
    const { a, b, setBased, inNode, pa, pb } = await twinPlans(30, setThree);
    await rechunk(pa, 7);
    await rechunk(pb, 7);
    const ranges: [number, number][] = [
      [0, 5],
      [5, 16],
      [16, 30],
      [30, 40],
    ];
    const ra = await runBatches(setBased, pa, ranges);
    const rb = await runBatches(inNode, pb, ranges);
    expect(ra.map((r) => took(r.sent, SET_BASED) && !took(r.sent, INSTANCE_READ))).toEqual([true, true, true, true]);
    expect(ra.map((r) => r.result)).toEqual(rb.map((r) => r.result));
    // Both paths: each job keeps its own set's time and the id it showed while Pending.
    expect(await mismatched(pa)).toEqual([]);
    expect(await mismatched(pb)).toEqual([]);
    expect(await observed(pa, a)).toEqual(await observed(pb, b));
  });

  it('leaves to node a range with a job row already (a Pending row written before job sets), which keeps its id', async () => {
    const { a, b, setBased, inNode, pa, pb } = await twinPlans(20, setAmount);
    // A job of each plan's range as a plan generated before job sets left it: a Pending row with its id.
    for (const planId of [pa, pb]) {
      await h.pool.query(
        `INSERT INTO alteration_jobs (plan_id, ord, id, instance_id, status, created_at)
         SELECT $1, 5, 'legacy-' || $1, instance_ids[6], 0, created_at FROM alteration_job_sets WHERE plan_id = $1 AND first_ord = 0`,
        [planId],
      );
    }
    const [ra] = await runBatches(setBased, pa, [[0, 20]]);
    const [rb] = await runBatches(inNode, pb, [[0, 20]]);
    // The statement found a row in the range and took nothing; the batch ran in node, reading its jobs.
    expect([took(ra!.sent, SET_BASED), took(ra!.sent, JOBS_READ), took(ra!.sent, INSTANCE_READ)]).toEqual([
      true,
      true,
      true,
    ]);
    expect(ra!.result).toEqual(rb!.result);
    expect(ra!.result.batch).toEqual({ completed: 20, failed: 0, skipped: 0 });
    expect(await observed(pa, a)).toEqual(await observed(pb, b));
    const { rows } = await h.pool.query('SELECT id, status FROM alteration_jobs WHERE plan_id = $1 AND ord = 5', [pa]);
    expect(rows).toEqual([{ id: `legacy-${pa}`, status: 2 }]);
    // Run again (a retried attempt after the first committed): nothing left to do, nothing written twice.
    const [again] = await runBatches(setBased, pa, [[0, 20]]);
    expect(again!.result.processed).toBe(0);
    expect(again!.result.batch).toEqual({ completed: 20, failed: 0, skipped: 0 });
  });

  it("works out a version's outcome of many alterations in time slices: the event loop turns meanwhile", async () => {
    const planId = `slices-${++seq}`;
    const alterations = Array.from({ length: 2000 }, (_, i) =>
      AlterationSchema.parse({ type: 'ModifyVariable', variableId: 'amount', value: i }),
    );
    rememberVersions(planId, [version, otherVersion]);
    const client = await h.workerPool.connect();
    try {
      // The definitions cached first: what follows does no I/O that would let the event loop turn anyway.
      await versionOutcomes(client, h.definitions, planId, alterations.slice(0, 1));
      let turned = false;
      setImmediate(() => (turned = true));
      const outcomes = await versionOutcomes(client, h.definitions, planId, alterations, new TimeSlice(undefined, 0));
      expect(turned).toBe(true);
      expect(Object.fromEntries(outcomes)).toEqual({
        [version]: [['amount', '/variables/amount', 1999]],
        [otherVersion]: [['amount', '/variables/amount', 1999]],
      });
    } finally {
      client.release();
    }
  });

  it('is reverted to the instances as they were, as a plan run in node is', async () => {
    const [a, b] = await twins(30);
    const before = await observed('none', a);
    const { pa, pb, setBased, inNode } = await bothWays(a, b, setThree, [
      [0, 15],
      [15, 30],
    ]);
    await completePlan(setBased, pa);
    await completePlan(inNode, pb);
    const reverts = [];
    for (const [planId, deps] of [
      [pa, setBased],
      [pb, inNode],
    ] as const) {
      const r = await h.request('POST', `/alterations/${planId}/revert`, { body: {} });
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      const revertId = r.body.planId as string;
      expect((await generateJobs(deps, revertId)).total).toBe(30);
      await runBatches(deps, revertId, [[0, 30]]);
      reverts.push(revertId);
    }
    const oa = await observed(reverts[0]!, a);
    const ob = await observed(reverts[1]!, b);
    expect(oa).toEqual(ob);
    // Back as seeded, but for the revision (two writes later) and updated_at, at the millisecond.
    expect(oa.instances.map((i) => i.variables)).toEqual(before.instances.map((i) => i.variables));
    expect(
      oa.instances.every((i) => i.revision === 2 && i.updated_at.toISOString() === '2026-01-02T03:04:05.678Z'),
    ).toBe(true);
    expect(oa.jobs.every((j) => j.status === 2)).toBe(true);
  });
});
