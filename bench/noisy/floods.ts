/**
 * The node's time as a share (contract section 8): tenant B's cheap reads alone and beside floods of other
 * tenants' and anonymous requests, each flood from a process of its own (test/support/flood.ts).
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { DEFINITION } from '../size/settings.js';
import { round, seedWithoutWorkflows, sleep } from '../util.js';
import { API_MS, API_RUNS, log, median, ROOT, SEED_SQL } from './settings.js';

/** Floods the service from a process of its own (test/support/flood.ts) for `ms`; the answers by status. */
function flood(o: { url: string; connections: number; ms: number; authorization?: string }) {
  return new Promise<Record<string, number>>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/flood.ts', JSON.stringify(o)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', () => {
      try {
        resolve(JSON.parse(out) as Record<string, number>);
      } catch {
        reject(new Error(`the flood printed no counts: ${out}`));
      }
    });
  });
}

/**
 * The node's time as a share: tenant B's cheap reads alone and beside each flood, API_RUNS times each, B's
 * median alone taken just before each flood. The ratio of each run, its worst, and what each flood got.
 */
export async function apiFloods(o: {
  base: string;
  adminKey: string;
  databaseUrl: string;
  keyA: string;
  keyB: string;
}) {
  const call = async (key: string | undefined, method: string, p: string, body?: unknown) => {
    const res = await fetch(`${o.base}${p}`, {
      method,
      headers: {
        ...(key ? { authorization: `ApiKey ${key}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, text };
  };
  const created = await call(o.adminKey, 'POST', '/identity/api-keys', {
    name: 'tenant-c',
    permissions: ['*'],
    tenantId: 'tenant-c',
  });
  const keyC = (JSON.parse(created.text) as { key: string }).key;
  const def = JSON.parse((await call(keyC, 'POST', '/workflow-definitions', DEFINITION)).text) as { id: string };
  const db = new pg.Client({ connectionString: o.databaseUrl });
  await db.connect();
  await seedWithoutWorkflows(db, SEED_SQL, [def.id, 5_000, 'tenant-c']);
  await db.end();
  log('tenant C: 5,000 instances seeded for pages of 1,000');

  const reads = [
    () => call(o.keyB, 'GET', '/workflow-definitions'),
    () => call(o.keyB, 'GET', '/workflow-instances?limit=20'),
    () => call(o.keyB, 'POST', '/alterations/dry-run?countOnly=true', { definitionIds: [DEFINITION.definitionId] }),
    () => call(o.keyB, 'GET', '/alterations?limit=5'),
  ];
  const probeB = async (ms: number) => {
    const times: number[] = [];
    let bad = 0;
    const until = Date.now() + ms;
    for (let i = 0; Date.now() < until; i++) {
      const t = performance.now();
      const r = await reads[i % reads.length]!();
      times.push(performance.now() - t);
      if (r.status !== 200) bad++;
    }
    return { median: median(times), n: times.length, bad };
  };
  await probeB(1_000); // warm-up
  const floods = [
    {
      name: "tenant C's pages of 1,000, 32 at a time",
      url: '/workflow-instances?limit=1000',
      connections: 32,
      key: keyC,
    },
    { name: "tenant A's cheap reads, 64 at a time", url: '/workflow-definitions', connections: 64, key: o.keyA },
    { name: 'anonymous /health/live, 64 at a time', url: '/health/live', connections: 64 },
    { name: 'anonymous unknown API keys, 64 at a time', url: '/workflow-definitions', connections: 64, key: 'random' },
    { name: 'anonymous /health/ready, 64 at a time', url: '/health/ready', connections: 64 },
  ];
  const report: Record<string, unknown>[] = [];
  const lines: string[] = [];
  for (const f of floods) {
    const runs: { aloneMs: number; besideMs: number; ratio: number; bBad: number; flood: Record<string, number> }[] =
      [];
    for (let i = 0; i < API_RUNS; i++) {
      const alone = await probeB(API_MS);
      const running = flood({
        url: `${o.base}${f.url}`,
        connections: f.connections,
        ms: API_MS + 600,
        ...(f.key === 'random' ? { authorization: 'random-key' } : f.key ? { authorization: `ApiKey ${f.key}` } : {}),
      });
      await sleep(300);
      const beside = await probeB(API_MS);
      const answers = await running;
      runs.push({
        aloneMs: round(alone.median, 2),
        besideMs: round(beside.median, 2),
        ratio: round(beside.median / alone.median, 2),
        bBad: beside.bad,
        flood: answers,
      });
    }
    const worst = Math.max(...runs.map((r) => r.ratio));
    report.push({ flood: f.name, runs, worstRatio: worst, target: 1.5 });
    lines.push(
      `${f.name}: B's median beside ÷ alone ${runs.map((r) => `${r.ratio}x (${r.aloneMs} → ${r.besideMs} ms)`).join(', ')}; worst ${worst}x (target ≤ 1.5x in every run)`,
    );
    log(lines[lines.length - 1]!);
  }
  return { report, lines };
}
