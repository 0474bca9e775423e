/**
 * The noisy-neighbour bench's settings (its NOISY_* knobs, read once at start), its log, the statement that
 * seeds a tenant's instances, and the latency summaries it reports.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { round, SEEDED_AT, seededId } from '../util.js';

/** The repository's root: the service and the floods run from it. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const RESULTS_FILE = process.env.NOISY_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'noisy-latest.json');
export const A_SIZE = Number(process.env.NOISY_A ?? 100_000);
export const B_SIZE = Number(process.env.NOISY_B ?? 10_000);
export const CALLS = Number(process.env.NOISY_CALLS ?? 60);
/** The plans run on rows as inserted (BENCH_FRESH_PAGES=1), not written once more and vacuumed first. */
export const FRESH_PAGES = process.env.BENCH_FRESH_PAGES === '1';
export const RUNS = Number(process.env.NOISY_RUNS ?? 3);
/**
 * B's plan starts once A's has done this share of its jobs (NOISY_A_HEAD, default 0.2): well under way, with most
 * of it still to run. Before 2026-11-28 B started 2 s after A's submit, which on a fast day was after A had ended.
 */
export const A_HEAD = Number(process.env.NOISY_A_HEAD ?? 0.2);
export const API_RUNS = Number(process.env.NOISY_API_RUNS ?? 5);
export const API_MS = Number(process.env.NOISY_API_MS ?? 3_000);
export const PHASES = new Set((process.env.NOISY_PHASES ?? 'plans,burst,api').split(','));
export const log = (msg: string) => process.stdout.write(`[noisy] ${msg}\n`);

export const SEED_SQL = `
  INSERT INTO workflow_instances
    (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
     variables, scheduled, bookmarks, created_at, updated_at)
  SELECT ${seededId('n', SEEDED_AT)}, $3, d.definition_id, d.id, d.version, 'noisy-' || n, 'noisy-' || n, 'Running', 'Suspended',
         '{"amount":0}'::jsonb, '[]'::jsonb, '[{"activityId":"wait","eventName":"approve"}]'::jsonb,
         ${SEEDED_AT}, now()
    FROM workflow_definitions d, generate_series(1, $2::int) AS n
   WHERE d.id = $1`;

export interface Stat {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  n: number;
}
export const quantiles = (xs: number[]): Stat => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
  return { p50Ms: round(at(0.5)), p99Ms: round(at(0.99)), maxMs: round(s[s.length - 1] ?? 0), n: s.length };
};
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
