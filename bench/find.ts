/**
 * What is broken, and where, at scale: the incident groups, a version's activity counts and the Dashboard's
 * instance statements for a tenant of
 * FIND_N instances (1,000,000) of which FIND_FAULTED (50,000) have an incident, in FIND_GROUPS (20) groups. The
 * statements the routes run (src/engine/incident-groups.ts), on an embedded Postgres of their own, on a vacuumed
 * table with statistics; the median of FIND_RUNS after one run that warms the cache.
 *
 *   npx tsx bench/find.ts
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { WorkflowDefinitionRequestSchema } from '../src/engine/definition-schema.js';
import { publishDefinition } from '../src/engine/definitions.js';
import { activityCounts, listIncidentGroups, unfinishedCounts } from '../src/engine/incident-groups.js';
import { DEFINITION, FAULT_SQL, SEED_SQL } from './size/settings.js';
import { round, seedWithoutWorkflows, stat } from './util.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const N = Number(process.env.FIND_N ?? 1_000_000);
const FAULTED = Number(process.env.FIND_FAULTED ?? 50_000);
const GROUPS = Number(process.env.FIND_GROUPS ?? 20);
const RUNS = Number(process.env.FIND_RUNS ?? 5);
const RESULTS_FILE = process.env.FIND_RESULTS_FILE ?? path.join(ROOT, 'bench', 'results', 'find-latest.json');
const log = (msg: string) => process.stdout.write(`[find] ${msg}\n`);

async function timed<T>(what: string, run: () => Promise<T>, check: (r: T) => void) {
  check(await run());
  const runsMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    check(await run());
    runsMs.push(round(performance.now() - t));
  }
  const { medianMs } = stat(runsMs);
  log(`${what}: median ${medianMs} ms (runs ${runsMs.join(', ')})`);
  return { medianMs, runsMs };
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'wfa-bench-find-'));
const pg = await startEmbeddedPostgres({ dataDir, port: Number(process.env.BENCH_PG_PORT ?? 54353), database: 'find' });
const pool = createPool(pg.url, 4);
try {
  await migrate(pool);
  const def = await publishDefinition(pool, '', WorkflowDefinitionRequestSchema.parse(DEFINITION));
  log(`seeding ${N.toLocaleString('en-US')} instances waiting on "wait"`);
  const t = performance.now();
  await seedWithoutWorkflows(pool, SEED_SQL, [def.id, N]);
  // Every N/FAULTED-th instance faulted: GROUPS groups.
  await seedWithoutWorkflows(pool, FAULT_SQL, [Math.floor(N / FAULTED), GROUPS]);
  await pool.query('VACUUM ANALYZE workflow_instances');
  log(`seeded in ${round((performance.now() - t) / 1000)} s`);

  const groups = await timed(
    'incident groups, first page of 20',
    () => listIncidentGroups(pool, '', { limit: 20 }),
    (r) => {
      const total = r.items.reduce((sum, g) => sum + g.count, 0);
      if (total !== FAULTED) throw new Error(`the groups hold ${total} instances, not ${FAULTED}`);
      if (r.items.length !== GROUPS) throw new Error(`${r.items.length} groups, not ${GROUPS}`);
    },
  );
  const counts = await timed(
    "a version's activity counts",
    () => activityCounts(pool, '', def.id, def.root.activities),
    (r) => {
      const waiting = r.find((a) => a.activityId === 'wait')?.waiting;
      if (waiting !== N - FAULTED) throw new Error(`${waiting} waiting on "wait", not ${N - FAULTED}`);
    },
  );
  // The Dashboard's statements about instances (src/console/pages/fleet.tsx): the unfinished ones per definition
  // and sub-status, then its five largest incident groups, one after the other as the page runs them.
  const dashboard = await timed(
    "the Dashboard's instance statements (unfinished counts, 5 largest groups)",
    async () => ({
      unfinished: await unfinishedCounts(pool, ''),
      groups: await listIncidentGroups(pool, '', { limit: 5 }),
    }),
    (r) => {
      const total = r.unfinished.reduce((sum, u) => sum + u.count, 0);
      if (total !== N) throw new Error(`the unfinished counts hold ${total} instances, not ${N}`);
      if (r.groups.items.length !== 5) throw new Error(`${r.groups.items.length} groups, not 5`);
    },
  );
  const results = {
    date: new Date().toISOString(),
    command: 'npx tsx bench/find.ts',
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGiB: round(os.totalmem() / 2 ** 30) },
    settings: { n: N, faulted: FAULTED, groups: GROUPS, runs: RUNS },
    incidentGroups: groups,
    activityCounts: counts,
    dashboard,
  };
  await mkdir(path.dirname(RESULTS_FILE), { recursive: true });
  await writeFile(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
  log(`results: ${RESULTS_FILE}`);
} finally {
  await pool.end();
  await pg.stop();
  await rm(dataDir, { recursive: true, force: true });
}
