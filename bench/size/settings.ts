/**
 * The plans bench's settings (its BENCH_* knobs, read once at start) and what it seeds: the definition, the
 * statement that inserts N suspended instances, and the raw UPDATE that is the floor.
 */
import { SEEDED_AT, seededId } from '../util.js';

export const DEFINITION_ID = 'bench-def';
export const PLAN_VALUE = 1001;
/**
 * The measured plan's alterations: a ModifyVariable of `amount` (the default), or with BENCH_PLAN=schedule a
 * ScheduleActivity of the definition's SetVariable `set` (amount = PLAN_VALUE), a pure step each job runs in
 * its batch. Both leave every instance with `amount` = PLAN_VALUE, which is what the raw UPDATE floor writes.
 */
export const PLAN_ALTERATIONS =
  process.env.BENCH_PLAN === 'schedule'
    ? [{ type: 'ScheduleActivity', activityId: 'set' }]
    : [{ type: 'ModifyVariable', variableId: 'amount', value: PLAN_VALUE }];
/**
 * BENCH_VERIFY=1: the plans carry a `verify` that every instance matches as soon as its job is done (it is still
 * Running), so that a plan with and without it can be compared.
 */
export const PLAN_VERIFY =
  process.env.BENCH_VERIFY === '1' ? { expect: { statuses: ['Running'] }, withinSeconds: 3600 } : undefined;
export const RAW_VALUE = 2002;
export const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 50);
/** How the bench learns that a plan ended: its event stream (default), or `poll` (every POLL_MS). */
export const WAIT_VIA: 'events' | 'poll' = process.env.BENCH_WAIT === 'poll' ? 'poll' : 'events';
export const PLAN_TIMEOUT_MS = Number(process.env.BENCH_PLAN_TIMEOUT_MS ?? 30 * 60_000);
/** BENCH_DRY_RUNS: how many dry-runs (and countOnly requests) each way; 5 by default. */
export const DRY_RUNS = Number(process.env.BENCH_DRY_RUNS ?? 5);
if (!Number.isInteger(DRY_RUNS) || DRY_RUNS < 1) throw new Error('BENCH_DRY_RUNS must be a whole number of 1 or more');

export const SEED_SQL = `
  INSERT INTO workflow_instances
    (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
     variables, scheduled, bookmarks, created_at, updated_at)
  SELECT ${seededId('n', SEEDED_AT)}, '', d.definition_id, d.id, d.version, 'bench-' || n, 'bench-' || n, 'Running', 'Suspended',
         '{"amount":0}'::jsonb, '[]'::jsonb, '[{"activityId":"wait","eventName":"approve"}]'::jsonb,
         ${SEEDED_AT}, now()
    FROM workflow_definitions d, generate_series(1, $2::int) AS n
   WHERE d.id = $1`;

/**
 * Faults every $1-th seeded instance (the k-th of them) with message k % $2 at the activity that message goes
 * with: $2 incident groups. $1 = N / faulted.
 */
export const FAULT_SQL = `
  WITH f AS (SELECT id, row_number() OVER (ORDER BY id) AS k FROM workflow_instances)
  UPDATE workflow_instances i
     SET sub_status = 'Faulted', bookmarks = '[]',
         incidents = jsonb_build_array(jsonb_build_object(
           'activityId', (ARRAY['start', 'wait', 'set'])[1 + (f.k / $1) % $2 % 3],
           'activityType', 'Elsa.Fault',
           'message', 'Payment gateway timed out, cause ' || ((f.k / $1) % $2) || ': ' || repeat('x', 150),
           'timestamp', to_char(now() - f.k * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
    FROM f WHERE f.id = i.id AND f.k % $1 = 0`;

export const RAW_UPDATE_SQL = `UPDATE workflow_instances SET variables = jsonb_set(variables, '{amount}', to_jsonb($2::int)), updated_at = now()
  WHERE tenant_id = '' AND definition_id = $1`;

export const lit = (value: unknown, typeName = 'String') => ({ typeName, expression: { type: 'Literal', value } });
export const DEFINITION = {
  definitionId: DEFINITION_ID,
  name: 'Bench',
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [
      { id: 'start', type: 'Elsa.WriteLine', version: 1, text: lit('start') },
      { id: 'wait', type: 'Elsa.Event', version: 1, eventName: lit('approve') },
      // Not connected: what a ScheduleActivity plan runs (BENCH_PLAN=schedule).
      {
        id: 'set',
        type: 'Elsa.SetVariable',
        version: 1,
        variable: lit('amount'),
        value: { typeName: 'Int32', expression: { type: 'Literal', value: PLAN_VALUE } },
      },
    ],
    connections: [{ source: { activity: 'start', port: 'Done' }, target: { activity: 'wait', port: 'In' } }],
  },
  variables: [{ id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 }],
};

/** BENCH_RECORD_UNDO=0: plan jobs record no before-image (the bench's way to measure what they cost). */
export const RECORD_UNDO = process.env.BENCH_RECORD_UNDO !== '0';

export const COLD = process.env.BENCH_COLD === '1';
export const FRESH_PAGES = process.env.BENCH_FRESH_PAGES === '1';
export const WARMUP_DEFINITION_ID = 'bench-warmup';
export const WARMUP_N = 10;

/** Runs of the raw UPDATE (BENCH_RAW_RUNS, default 3): the floor is their median, as the VM's speed drifts. */
export const RAW_RUNS = Math.max(1, Number(process.env.BENCH_RAW_RUNS ?? 3));
