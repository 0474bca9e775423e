/**
 * The dry-run's latency with the plan's filter: streamed ids and `countOnly`, read in the service's process
 * and by a client in a process of its own over HTTP.
 */
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import type pg from 'pg';
import { serveApi } from '../../src/api/server.js';
import { round, stat } from '../util.js';
import { type Api, expectStatus } from './service.js';
import { DRY_RUNS } from './settings.js';

/**
 * The dry-run as a client in a process of its own sees it, over HTTP (bench/dry-run-client.ts): the service
 * listens on a free port of 127.0.0.1 for as long as the client runs.
 */
async function dryRunsOverHttp(
  app: { fetch: (r: Request) => Response | Promise<Response> },
  key: string,
  filter: unknown,
) {
  const server = serveApi(app, { port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const root = path.resolve(import.meta.dirname, '..', '..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(root, 'bench', 'dry-run-client.ts'),
        JSON.stringify({ url, key, filter, runs: DRY_RUNS }),
      ],
      { cwd: root, maxBuffer: 1 << 20 },
    );
    return JSON.parse(stdout) as { runsMs: number[]; counts: number[]; countOnlyMs: number[]; countOnly: number[] };
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/**
 * Dry-run latency, the median of DRY_RUNS, on a vacuumed table with statistics: read in this process (the
 * service's app called directly, the bench's reading on the service's thread) and, after it, by a client in
 * a process of its own over HTTP, as a user's would be.
 */
export async function dryRuns(
  api: Api,
  benchPool: pg.Pool,
  filter: unknown,
  n: number,
  http?: { app: Parameters<typeof dryRunsOverHttp>[0]; key: string },
) {
  await benchPool.query('VACUUM ANALYZE workflow_instances');
  const runsMs: number[] = [];
  let count = -1;
  for (let i = 0; i < DRY_RUNS; i++) {
    const d0 = performance.now();
    // Read as a client that streams would, counting the ids without holding the body, so that the
    // process's memory is the service's (the bench's own client and the service share the process).
    const res = await api.raw('POST', '/alterations/dry-run', filter);
    if (res.status !== 200) throw new Error(`dry-run: HTTP ${res.status} ${await res.text()}`);
    let quotes = 0;
    let tail = '';
    for await (const chunk of res.body!) {
      // The quotes counted where they lie in the bytes (memchr), not char by char in JS: the bench's own
      // reading shares this process's CPU with the service it measures.
      const bytes = Buffer.from(chunk as Uint8Array);
      for (let k = bytes.indexOf(34); k !== -1; k = bytes.indexOf(34, k + 1)) quotes++;
      tail = (tail + bytes.subarray(-4).toString('latin1')).slice(-4);
    }
    runsMs.push(round(performance.now() - d0));
    // {"workflowInstanceIds":["a","b",…]}: two quotes around the key, two around each id.
    count = tail.trimEnd().endsWith(']}') ? (quotes - 2) / 2 : -1;
    if (count !== n) break;
  }
  // countOnly: the count without the ids.
  const countMs: number[] = [];
  for (let i = 0; i < DRY_RUNS; i++) {
    const d0 = performance.now();
    const r = await api<{ count: number }>('POST', '/alterations/dry-run?countOnly=true', filter);
    countMs.push(round(performance.now() - d0));
    expectStatus(r, 200, 'dry-run countOnly');
    if (r.body.count !== n) throw new Error(`countOnly answered ${r.body.count}, not ${n}`);
  }
  const overHttp = http ? await dryRunsOverHttp(http.app, http.key, filter) : undefined;
  const httpOk = !overHttp || (overHttp.counts.every((c) => c === n) && overHttp.countOnly.every((c) => c === n));
  return {
    medianMs: stat(runsMs).medianMs,
    runsMs,
    count,
    ok: count === n && httpOk,
    countOnlyMedianMs: stat(countMs).medianMs,
    ...(overHttp
      ? {
          overHttp: {
            medianMs: stat(overHttp.runsMs).medianMs,
            runsMs: overHttp.runsMs,
            countOnlyMedianMs: stat(overHttp.countOnlyMs).medianMs,
            countOnlyMs: overHttp.countOnlyMs,
            ok: httpOk,
          },
        }
      : {}),
  };
}
