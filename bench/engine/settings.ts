/**
 * The engine bench's settings (its BENCH_ENGINE_* knobs, read once at start) and what it publishes: the names
 * of its queues, workflow types and definitions, and the service's test definition.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEV_SERVER_MODES, type DevServerMode } from '../engine-devserver.js';

/** The repository's root: the service and the baseline worker run from it. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer, not "${raw}"`);
  return v;
}

export const N = intEnv('BENCH_ENGINE_N', 10_000);
export const CLIENTS = intEnv('BENCH_ENGINE_CLIENTS', 16);
export const POLL_MS = intEnv('BENCH_ENGINE_POLL_MS', 50);
/** Longest wait for a phase to reach N in Postgres (the bench fails past it). */
export const WAIT_MS = intEnv('BENCH_ENGINE_TIMEOUT_MS', 30 * 60_000);
/** Longest wait for Temporal's count to reach N (then the count reached is reported and the bench goes on). */
export const TEMPORAL_WAIT_MS = intEnv('BENCH_ENGINE_TEMPORAL_WAIT_MS', 10 * 60_000);
export const TEMPORAL_POLL_MS = 250;
/** The service, its Postgres, the baseline worker and the dev server together below this (% of one core): quiet. */
export const QUIET_PERCENT = intEnv('BENCH_ENGINE_QUIET_PERCENT', 15);
export const MODE = (process.env.BENCH_ENGINE_DEVSERVER ?? 'wal') as DevServerMode;
if (!DEV_SERVER_MODES.includes(MODE))
  throw new Error(`BENCH_ENGINE_DEVSERVER must be one of ${DEV_SERVER_MODES.join(', ')}, not "${MODE}"`);
export const RESULTS_FILE =
  process.env.BENCH_ENGINE_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'engine-latest.json');
export const KEEP = process.env.BENCH_ENGINE_KEEP === '1';
/** Instances run to the end before the measured phases, on both sides (0: none). */
export const WARMUP = Number(process.env.BENCH_ENGINE_WARMUP ?? 20);

export const NAMESPACE = 'default';
export const BASELINE_QUEUE = 'bench-engine-baseline';
export const BASELINE_TYPE = 'baselineInstance';
export const INSTANCE_TYPE = 'instanceExecution';
export const DEFINITION_ID = 'engine-bench';
export const EVENT_NAME = 'go';
export const SET_ACTIVITY = 'set';
export const SET_VALUE = 42;
export const WARMUP_DEFINITION_ID = 'engine-bench-warm-up';
/**
 * d. The outbound-call phase (BENCH_ENGINE_CALLS=0 leaves it out): CALL_N (BENCH_ENGINE_CALL_N, default N up
 * to 2,000) instances of a definition whose one step is a Send HTTP Request to a local endpoint, against CALL_N
 * bare Temporal workflows whose regular activity calls the same endpoint (then a local activity writes the
 * row). Tenant shares as configured by default (the service's outbound share per tenant on).
 */
export const CALLS = process.env.BENCH_ENGINE_CALLS !== '0';
/** c.burst: phase c's plan again right after N more starts (BENCH_ENGINE_BURST=0 leaves it out). */
export const BURST = process.env.BENCH_ENGINE_BURST !== '0';
export const CALL_N = intEnv('BENCH_ENGINE_CALL_N', Math.min(N, 2_000));
export const CALL_DEFINITION_ID = 'engine-bench-call';
export const CALL_CONNECTION = 'engine-bench-endpoint';
export const BASELINE_CALL_TYPE = 'baselineCall';
export const WARMUP_EVENT = 'warm-up';

export const lit = (value: unknown, typeName = 'String') => ({ typeName, expression: { type: 'Literal', value } });
const connect = (source: string, target: string) => ({
  source: { activity: source, port: 'Done' },
  target: { activity: target, port: 'In' },
});
/** The service's test definition: WriteLine → Event "go" → SetVariable result = 42. */
export const ENGINE_DEFINITION = {
  definitionId: DEFINITION_ID,
  name: 'Engine bench',
  variables: [{ id: 'result', name: 'Result', typeName: 'Int32', value: 0 }],
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    activities: [
      { id: 'write', type: 'Elsa.WriteLine', version: 1, text: lit('started') },
      { id: 'wait', type: 'Elsa.Event', version: 1, eventName: lit(EVENT_NAME) },
      {
        id: SET_ACTIVITY,
        type: 'Elsa.SetVariable',
        version: 1,
        variable: lit('result'),
        value: lit(SET_VALUE, 'Int32'),
      },
    ],
    connections: [connect('write', 'wait'), connect('wait', SET_ACTIVITY)],
  },
};

export const log = (msg: string) => process.stdout.write(`[engine] ${msg}\n`);
