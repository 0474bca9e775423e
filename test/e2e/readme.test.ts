import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';

/**
 * The README's walk-through, run as written: its shell blocks between the walkthrough markers, in one
 * bash (set -euo pipefail), against the service started as a separate process, from a folder outside the
 * clone, with an empty HOME and no registry reachable. It works in the scratch folder it makes (~/wfa-try). `wfa` is on PATH the way the README puts it there
 * (`npm link`, into a global folder of the test's own); `npx` is not there at all.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let service: SpawnedService;
let adminKey: string;
let work: string;
let url: string;

function run(
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('error', (e) => resolve({ code: null, out, err: `${err}\n${e.message}` }));
    child.once('exit', (code) => resolve({ code, out, err }));
  });
}

function markedBlocks(readme: string, marker: string): string[] {
  const start = readme.indexOf(`<!-- ${marker}:start -->`);
  const end = readme.indexOf(`<!-- ${marker}:end -->`);
  if (start < 0 || end < start) throw new Error(`README.md has no ${marker} markers`);
  return [...readme.slice(start, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}
const walkthroughBlocks = (readme: string) => markedBlocks(readme, 'walkthrough');

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
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const blocks = walkthroughBlocks(readme);
    // The way the README gives `wfa` a place on PATH, run below as written.
    expect(readme).toMatch(/^```sh\nnpm link {4}#/m);
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    // The README's `npm link`, as a user with their own npm global folder (npm_config_prefix), offline.
    const prefix = path.join(work, 'npm-global');
    const offline = {
      npm_config_prefix: prefix,
      npm_config_registry: 'http://127.0.0.1:9/',
      npm_config_offline: 'true',
    };
    const link = await run('npm', ['link', '--no-audit', '--no-fund'], ROOT, {
      ...process.env,
      HOME: work,
      ...offline,
    });
    expect(link.code, link.err).toBe(0);
    const script = path.join(work, 'walkthrough.sh');
    await writeFile(
      script,
      [
        'set -euo pipefail',
        // Nothing in the walk-through may reach for npx (outside a clone it asks the public registry).
        'npx() { echo "npx was called: npx $*" >&2; return 127; }',
        ...blocks,
        // Then Change management, as written, in the same folder.
        ...markedBlocks(readme, 'change-management'),
        // Then Audit.
        ...markedBlocks(readme, 'audit'),
      ].join('\n'),
    );
    const result = await run('bash', [script], work, {
      PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}`,
      HOME: work,
      WFA_URL: url,
      WFA_API_KEY: adminKey,
      ...offline,
    });
    expect(result.err).toBe('');
    expect(result.code, result.out.slice(-2000)).toBe(0);
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
    expect(out).toMatch(/approve-1 {2}Completed\n {2}ModifyVariable approved\n {2}█{40} {2}11\/11/);
    const json = out.slice(out.lastIndexOf('{\n  "items"'), out.indexOf('Published order-approval version 2'));
    expect((JSON.parse(json) as { items: { status: number; log: unknown[] }[] }).items).toHaveLength(2);
    // Every kind of change.
    expect(out).toMatch(/Published order-approval version 2 \(/);
    // The draft maps the renamed waiting step by its type and name.
    expect(out).toContain(
      'order-approval version 1 → 2: 2 activities keep their id, 1 mapped by type and name, 0 unmapped',
    );
    expect(out).toMatch(/wait +await-approval +sameTypeAndName/);
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
    expect(out).toMatch(/\n2\n/);
    // Find, fix, verify: the group, its counts, a retry that fixes two of four, the retry of exactly the rest.
    expect(out).toMatch(/^4 +price-sync v1 +copy \(Elsa\.SetVariable\) +\S/m);
    expect(out).toMatch(/^copy +Elsa\.SetVariable +0 +0 +4\s*$/m);
    expect(out).toContain('verify within 5 s: 2 verified, 2 not verified, 0 pending');
    expect(out).toMatch(/Not verified within 5 s: the instance is Running\/Faulted, /);
    expect(out).toContain('Retrying what plan retry-copy-1 did not get done with plan retry-copy-2');
    expect(out).toContain('verify within 5 s: 2 verified, 0 not verified, 0 pending');
    expect(out).toMatch(
      /^retry-copy-2 +Completed +Verified +ScheduleActivity .*\nretry-copy-1 +Completed +Unverified +ScheduleActivity /m,
    );
    // Change management.
    expect(out).toMatch(/Created user carol \(/);
    expect(out).toMatch(/carol +alterations:view,alterations:approve +ADMIN_API_KEY \(key\)/);
    expect(out).toMatch(/raise-limits {2}AwaitingApproval/);
    expect(out).toMatch(/approval Pending: asked by alice \(API key\) for 10 instances/);
    expect(out).toContain('A plan cannot be approved by the principal that submitted it');
    expect(out).toContain('/variables/approved: false → true');
    expect(out).toMatch(/Approved plan raise-limits: /);
    expect(out).toMatch(/nightly {2}Paused \(schedule\)/);
    expect(out).toMatch(/nightly {2}Paused \(schedule\)\n(.*\n)*Completed: 10 completed, 0 failed, 0 cancelled of 10/);
    // Audit: the plan's submitter and approver, the chain, the exports.
    expect(out).toMatch(/ bob +plan\.approve +plan raise-limits +202\n/);
    expect(out).toMatch(/ alice +plan\.submit +plan raise-limits +202\n/);
    expect(out).toMatch(/^The chain holds: \d+ entries checked$/m);
    const csv = await readFile(path.join(work, 'wfa-try', 'raise-limits.csv'), 'utf8');
    expect(csv.trim().split('\n')).toHaveLength(11);
    const audit = (await readFile(path.join(work, 'wfa-try', 'audit.ndjson'), 'utf8')).trim().split('\n');
    expect(audit.map((l) => (JSON.parse(l) as { action: string }).action)).toContain('policy.update');
    // The walkthrough's files go to the scratch folder it makes, never into the folder it was started in
    // (a user's clone, where they would be the user's files among the project's).
    expect(blocks[0]).toMatch(/^mkdir -p ~\/wfa-try && cd ~\/wfa-try {3}#/);
    expect((await readdir(path.join(work, 'wfa-try'))).filter((f) => f.endsWith('.json')).sort()).toEqual([
      'approve-suspended.json',
      'cancel-order-2.json',
      'card-check.json',
      'fix-input.json',
      'migrate.json',
      'nightly.json',
      'order-approval-v2.json',
      'order-approval.json',
      'price-sync.json',
      'raise-limits.json',
      'retry-copy.json',
      'schedule-set.json',
      'unapprove.json',
    ]);
    expect((await readdir(work)).filter((f) => f.endsWith('.json'))).toEqual([]);
  }, 240_000);
});
