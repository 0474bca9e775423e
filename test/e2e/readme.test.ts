import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';

/**
 * The README's walk-through, run as written: its shell blocks between the walkthrough markers, in one
 * bash (set -euo pipefail), against the service started as a separate process. `npx wfa` is the CLI of
 * this clone, as in the README.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let service: SpawnedService;
let adminKey: string;
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
  // A namespace of its own: the README's plan ids are fixed, and a Temporal server (TEMPORAL_ADDRESS) may
  // outlive one run and still hold alteration-plan-approve-1 from the last.
  const namespace = `readme-${randomBytes(4).toString('hex')}`;
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  await connection.close();
  service = await spawnService('readme', work, { TEMPORAL_NAMESPACE: namespace });
  url = service.url;
  adminKey = service.adminKey;
}, 150_000);

afterAll(async () => {
  await service?.stop();
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
    expect(out).toMatch(
      /11 instances match; the first 2:\n {2}\S+ {2}ok\n {4}\/variables\/approved: false → true\n {2}\S+ {2}ok\n/,
    );
    expect(out).toContain('Completed: 11 completed, 0 failed, 0 cancelled of 11');
    expect(out).toMatch(/approve-1 {2}Completed\n {2}ModifyVariable\n {2}█{40} {2}11\/11/);
    const json = out.slice(out.lastIndexOf('{\n  "items"'), out.indexOf('Published order-approval version 2'));
    expect((JSON.parse(json) as { items: { status: number; log: unknown[] }[] }).items).toHaveLength(2);
    // Every kind of change.
    expect(out).toMatch(/Published order-approval version 2 \(/);
    expect(out).toMatch(/Submitted plan migrate-1\n(.*\n)*Completed: 11 completed, 0 failed, 0 cancelled of 11/);
    expect(out).toMatch(/yes +dispatched +ScheduleActivity succeeded/);
    expect(out).toMatch(/Submitted plan cancel-1\n(.*\n)*Completed: 1 completed, 0 failed, 0 cancelled of 1/);
    expect(out).toMatch(/order-approval v2 +Finished\/Cancelled/);
    expect(out).toMatch(/steer-1 {2}Paused \(canary\)\n(.*\n)* {2}█+░* {2}3\/10/);
    expect(out).toContain('Resumed plan steer-1: Running');
    expect(out).toMatch(
      /Reverting plan steer-1 with plan steer-1-undo\n(.*\n)*Completed: 10 completed, 0 failed, 0 cancelled of 10/,
    );
    expect(out).toMatch(/card-check v1 +Running\/Faulted/);
    expect(out).toMatch(/charge +Elsa\.Fault +card declined/);
    expect(out.trim().split('\n').at(-1)).toBe('2');
  }, 240_000);
});
