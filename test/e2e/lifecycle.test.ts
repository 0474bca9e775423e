import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import {
  embeddedEnv,
  exitWithin,
  noneLeft,
  processTable,
  processTree,
  type Spawned,
  spawnKept,
} from '../support/processes.js';

/**
 * `npm start` as a user runs it, in its own process group (a terminal's Ctrl-C reaches the whole group),
 * in embedded mode on one data folder, under CPU load (two busy processes on a two-core machine):
 * SIGINT at random moments of its life, then kill -9 of the whole group, and after each a next start on
 * the same data that comes up healthy, with no process of the last one left.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
// Two rounds of the five moments below by default (each stop and start costs about 11 s under the load);
// LIFECYCLE_STOPS=40 for a longer hunt.
const STOPS = Number(process.env.LIFECYCLE_STOPS ?? 10);
const INSTANCES = Number(process.env.LIFECYCLE_INSTANCES ?? 50_000);
const ADMIN_KEY = `wfa_lifecycle_${randomBytes(12).toString('hex')}`;
const lit = (value: unknown) => ({ typeName: 'Int32', expression: { type: 'Literal', value } });

let work: string;
let dataDir: string;
let ports: { api: number; postgres: number; temporal: number };
const burners: ChildProcess[] = [];

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-lifecycle-'));
  // DATA_DIR itself (as root, the postgres user may enter DATA_DIR, not a private folder above it).
  dataDir = work;
  ports = { api: await freePort(), postgres: await freePort(), temporal: await freePort() };
  for (let i = 0; i < 2; i++) burners.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
});

afterAll(async () => {
  for (const b of burners) b.kill('SIGKILL');
  await rm(work, { recursive: true, force: true });
});

function npmStart(): Spawned {
  const env = embeddedEnv(dataDir, ports, { ADMIN_API_KEY: ADMIN_KEY });
  // Its own process group, as a shell gives a job: the group is what a Ctrl-C or kill -9 -PGID reaches.
  return spawnKept('npm', ['start'], { cwd: ROOT, env, detached: true });
}

const health = () =>
  fetch(`http://127.0.0.1:${ports.api}/health`).then(
    (r) => r.status,
    () => 0,
  );

async function waitHealthy(p: Spawned, what: string): Promise<void> {
  const deadline = Date.now() + 180_000;
  while ((await health()) !== 200) {
    if (p.done() || Date.now() > deadline)
      throw new Error(`${what}: not healthy (${p.done() ? 'exited' : 'timed out'})\n${p.tail()}`);
    await sleep(100);
  }
}

async function api<T>(method: string, route: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://127.0.0.1:${ports.api}${route}`, {
    method,
    headers: {
      authorization: `ApiKey ${ADMIN_KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

/** Every process of this start: its tree, anything naming the data folder, and the parent-death watch. */
function ownProcesses(p: Spawned): number[] {
  const table = processTable();
  const pids = new Set(processTree(p.child.pid!));
  for (const [pid, info] of table) if (info.pgid === p.child.pid) pids.add(pid);
  return [...pids];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const random = (max: number) => Math.floor(Math.random() * max);

async function expectNothingLeft(p: Spawned, seen: number[], what: string): Promise<void> {
  const pids = [...new Set([...seen, ...ownProcesses(p)])];
  expect(await noneLeft(pids, dataDir, 15_000), `${what}: processes left\n${p.tail()}`).toEqual([]);
}

describe('npm start, stopped at any moment', () => {
  it(
    `Ctrl-C (SIGINT to the process group) at ${STOPS} random moments under CPU load leaves nothing running, and every next start is healthy`,
    async () => {
      // The data: a definition and INSTANCES suspended instances, for plans to be interrupted.
      const first = npmStart();
      await waitHealthy(first, 'first start');
      const def = await api<{ id: string }>('POST', '/workflow-definitions', {
        definitionId: 'lifecycle',
        name: 'Lifecycle',
        root: {
          type: 'Elsa.Flowchart',
          id: 'flow1',
          activities: [{ id: 'wait', type: 'Elsa.Event', version: 1, eventName: lit('approve') }],
          connections: [],
        },
        variables: [{ id: 'amount', name: 'Amount', typeName: 'Int32', value: 0 }],
      });
      expect(def.status, JSON.stringify(def.body)).toBe(201);
      const password = (await readFile(path.join(dataDir, 'postgres.password'), 'utf8')).trim();
      const db = new pg.Client({
        host: '127.0.0.1',
        port: ports.postgres,
        user: 'postgres',
        password,
        database: 'workflow_alterations',
      });
      await db.connect();
      // Seeded rows get no workflow each (the outbox is off for the load, as in test/support/seed.ts).
      await db.query('BEGIN');
      await db.query("SET LOCAL wfa.outbox = 'off'");
      await db.query(
        `INSERT INTO workflow_instances
           (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
            variables, scheduled, bookmarks, created_at, updated_at)
         SELECT gen_random_uuid()::text, '', d.definition_id, d.id, d.version, 'lc-' || n, 'lc-' || n, 'Running',
                'Suspended', '{"amount":0}'::jsonb, '[]'::jsonb, '[{"activityId":"wait","eventName":"approve"}]'::jsonb,
                now() + n * interval '1 microsecond', now()
           FROM workflow_definitions d, generate_series(1, $2::int) AS n WHERE d.id = $1`,
        [def.body.id, INSTANCES],
      );
      await db.query('COMMIT');
      await db.end();
      let current = first;
      let seen = ownProcesses(current);
      const plans: string[] = [];
      const moments = ['right after /health', 'while starting', 'during a plan', 'during the stop', 'at random'];
      for (let i = 0; i < STOPS; i++) {
        const moment = moments[i % moments.length]!;
        const what = `stop ${i + 1} (${moment})`;
        const group = current.child.pid!;
        if (moment === 'during a plan') {
          const submit = await api<{ planId: string }>('POST', '/alterations/submit', {
            alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: i + 1 }],
            filter: { definitionIds: ['lifecycle'] },
          });
          expect(submit.status, `${what}: ${JSON.stringify(submit.body)}`).toBe(202);
          plans.push(submit.body.planId);
          await sleep(200 + random(2_000));
        } else if (moment === 'at random') {
          await sleep(random(3_000));
        }
        seen = [...new Set([...seen, ...ownProcesses(current)])];
        process.kill(-group, 'SIGINT');
        if (moment === 'during the stop') {
          await sleep(random(1_500));
          if (!current.done()) process.kill(-group, 'SIGINT');
        }
        const exit = await exitWithin(current, 120_000);
        expect(exit, `${what}\n${current.tail()}`).not.toBe('hung');
        // A SIGINT before node has set up its handlers ends it at once, before it has started anything.
        if (moment !== 'while starting')
          expect(current.out(), `${what}\n${current.tail()}`).toContain('"msg":"stopped"');
        await expectNothingLeft(current, seen, what);

        current = npmStart();
        if (moments[(i + 1) % moments.length] === 'while starting') {
          // The next stop comes at a random moment of the start itself.
          await sleep(random(4_000));
          seen = ownProcesses(current);
          continue;
        }
        await waitHealthy(current, `start after ${what}`);
        seen = ownProcesses(current);
      }
      // The plans interrupted on the way finish after the restarts: the last one's value is everyone's.
      await waitHealthy(current, 'last start');
      for (const planId of plans) {
        const deadline = Date.now() + 300_000;
        let status = -1;
        while (Date.now() < deadline) {
          status = (await api<{ plan: { status: number } }>('GET', `/alterations/${planId}`)).body.plan.status;
          if (status >= 4 && status !== 7) break;
          await sleep(500);
        }
        expect(status, `plan ${planId}`).toBe(4);
      }
      process.kill(-current.child.pid!, 'SIGINT');
      expect(await exitWithin(current, 120_000)).not.toBe('hung');
      await expectNothingLeft(current, seen, 'last stop');
    },
    60 * 60_000,
  );

  it('kill -9 of the whole group leaves nothing running for long, and the next start on the same data comes up', async () => {
    for (const watchAlive of [true, false]) {
      const what = watchAlive ? 'kill -9' : 'kill -9, the watch killed too';
      const p = npmStart();
      await waitHealthy(p, what);
      const seen = ownProcesses(p);
      const table = processTable();
      const watch = seen.find((pid) => table.get(pid)?.cmdline.includes('while read -r cmd pid sig grace'));
      expect(watch, 'the parent-death watch runs').toBeDefined();
      // Without the watch (killed first, as an OOM killer might), the next start stops the leftovers itself.
      if (!watchAlive) process.kill(watch!, 'SIGKILL');
      process.kill(-p.child.pid!, 'SIGKILL');
      await p.exited;
      if (watchAlive) await expectNothingLeft(p, seen, what);
      const next = npmStart();
      await waitHealthy(next, `start after ${what}`);
      if (!watchAlive) {
        expect(next.out()).toMatch(
          /stopping the embedded Postgres \(pid \d+\) that an earlier run of this data folder left running/,
        );
        expect(next.out()).toMatch(/stopping the Temporal dev server \(pid \d+\) that an earlier run/);
      }
      const nextSeen = ownProcesses(next);
      process.kill(-next.child.pid!, 'SIGINT');
      expect(await exitWithin(next, 120_000)).not.toBe('hung');
      await expectNothingLeft(next, nextSeen, `stop after ${what}`);
    }
  }, 600_000);

  it('refuses a second service on a data folder a live one holds, and leaves the first running', async () => {
    const p = npmStart();
    await waitHealthy(p, 'first');
    const second = spawnKept(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: '',
        TEMPORAL_ADDRESS: '',
        DATA_DIR: dataDir,
        PORT: String(await freePort()),
      },
    });
    const exit = await exitWithin(second, 60_000);
    expect(exit).toMatchObject({ code: 1 });
    expect(second.err()).toMatch(new RegExp(`DATA_DIR ${dataDir} is in use by another running service \\(pid \\d+\\)`));
    expect(await health()).toBe(200);
    const seen = ownProcesses(p);
    process.kill(-p.child.pid!, 'SIGINT');
    expect(await exitWithin(p, 120_000)).not.toBe('hung');
    await expectNothingLeft(p, seen, 'stop');
  }, 300_000);
});
