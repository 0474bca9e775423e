import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { freePort } from '../support/free-port.js';

/**
 * The README's walk-through, run as written: its shell blocks between the walkthrough markers, in one
 * bash (set -euo pipefail), against the service started as a separate process. `npx wfa` is the CLI of
 * this clone, as in the README.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = randomBytes(4).toString('hex');
const adminKey = `wfa_readme_${randomBytes(16).toString('hex')}`;
let service: ChildProcess;
let work: string;
let url: string;

function walkthroughBlocks(readme: string): string[] {
  const start = readme.indexOf('<!-- walkthrough:start -->');
  const end = readme.indexOf('<!-- walkthrough:end -->');
  if (start < 0 || end < start) throw new Error('README.md has no walkthrough markers');
  return [...readme.slice(start, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-readme-'));
  const database = `wfa_readme_${run}`;
  await ensureDatabase(inject('pgAdminUrl'), database);
  const dbUrl = new URL(inject('pgAdminUrl'));
  dbUrl.pathname = `/${database}`;
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  // A namespace of its own: the README's plan ids are fixed, and a Temporal server (TEMPORAL_ADDRESS) may
  // outlive one run and still hold alteration-plan-approve-1 from the last.
  const namespace = `readme-${run}`;
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  await connection.close();
  service = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: dbUrl.toString(),
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_NAMESPACE: namespace,
      DATA_DIR: path.join(work, 'data'),
      PORT: String(port),
      ADMIN_API_KEY: adminKey,
      AUTH_SIGNING_KEY: `readme ${run}`,
      LOG_LEVEL: 'warn',
    },
    stdio: 'ignore',
  });
  const deadline = Date.now() + 90_000;
  while (
    (await fetch(`${url}/health`).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    if (Date.now() > deadline || service.exitCode !== null) throw new Error('the service did not become healthy');
    await new Promise((r) => setTimeout(r, 250));
  }
}, 120_000);

afterAll(async () => {
  if (service && service.exitCode === null) {
    const exited = new Promise((r) => service.once('exit', r));
    service.kill('SIGTERM');
    await exited;
  }
  await rm(work, { recursive: true, force: true });
});

describe('the README walk-through', () => {
  it('runs as written and does what its comments say', async () => {
    const blocks = walkthroughBlocks(await readFile(path.join(ROOT, 'README.md'), 'utf8'));
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    const script = path.join(work, 'walkthrough.sh');
    await writeFile(
      script,
      [
        'set -euo pipefail',
        // `npx wfa` in the clone is this CLI; the function spares the test npm's start-up per call.
        `npx() { if [ "$1" = wfa ]; then shift; node ${JSON.stringify(path.join(ROOT, 'src', 'cli', 'wfa.js'))} "$@"; else command npx "$@"; fi; }`,
        ...blocks,
      ].join('\n'),
    );
    const result = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn('bash', [script], {
        cwd: work,
        env: { PATH: process.env.PATH, HOME: work, WFA_URL: url, WFA_API_KEY: adminKey },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      child.on('exit', (code) => resolve({ code, out, err }));
    });
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    const out = result.out;
    expect(out).toMatch(/Published order-approval version 1 \(/);
    expect(out).toMatch(/Running\/Suspended/);
    expect(out).toMatch(/Waiting on: approve \(wait\)/);
    expect(out).toContain('Resumed 1 instance(s)');
    expect(out).toMatch(/order-approval v1\s+Finished\/Finished/);
    expect(out).toContain('11 instances match');
    expect(out).toContain('Completed: 11 completed, 0 failed, 0 cancelled of 11');
    expect(out).toMatch(/approve-1 {2}Completed\n {2}ModifyVariable\n {2}█{40} {2}11\/11/);
    const json = out.slice(out.lastIndexOf('{\n  "items"'));
    expect((JSON.parse(json) as { items: { status: number; log: unknown[] }[] }).items).toHaveLength(2);
  }, 240_000);
});
