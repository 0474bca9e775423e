/** The floor a plan is measured against: the same change as one SQL statement. */
import type pg from 'pg';
import { walLsn, walMbSince } from '../instrument.js';
import { round } from '../util.js';
import { DEFINITION_ID, RAW_RUNS, RAW_UPDATE_SQL, RAW_VALUE } from './settings.js';

/** The floor: the same change as one statement, RAW_RUNS times on a vacuumed table; the median run counts. */
export async function rawUpdate(benchPool: pg.Pool, n: number) {
  const runs: { ms: number; walMb: number | null; rows: number; verified: number }[] = [];
  for (let i = 0; i < RAW_RUNS; i++) {
    await benchPool.query('VACUUM ANALYZE workflow_instances');
    await benchPool.query('CHECKPOINT').catch(() => undefined);
    const walBefore = await walLsn(benchPool);
    const t = performance.now();
    const res = await benchPool.query(RAW_UPDATE_SQL, [DEFINITION_ID, RAW_VALUE + i]);
    const ms = performance.now() - t;
    const walMb = await walMbSince(benchPool, walBefore);
    const { rows } = await benchPool.query<{ n: number }>(
      `SELECT count(*) AS n FROM workflow_instances WHERE tenant_id = '' AND definition_id = $1 AND variables->'amount' = $2::jsonb`,
      [DEFINITION_ID, JSON.stringify(RAW_VALUE + i)],
    );
    runs.push({ ms, walMb, rows: res.rowCount ?? 0, verified: rows[0]!.n });
  }
  const median = [...runs].sort((x, y) => x.ms - y.ms)[Math.floor((runs.length - 1) / 2)]!;
  return {
    ms: median.ms,
    walMb: median.walMb,
    result: {
      ms: round(median.ms),
      runsMs: runs.map((r) => round(r.ms)),
      rows: median.rows,
      verified: Math.min(...runs.map((r) => r.verified)),
      ok: runs.every((r) => r.rows === n && r.verified === n),
    },
  };
}
