import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedInstances } from '../support/seed.js';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';
import { runWfa, startWfa } from '../support/wfa.js';
import { approvalWithNote } from '../support/workflows.js';

/**
 * `wfa audit` (list, --follow, verify, export) and `wfa plans export`, spawned as a user runs them against a
 * spawned service: what a change wrote to the trail, read back from a terminal.
 */
let service: SpawnedService;
let work: string;
let pool: pg.Pool;

const wfa = (args: string[]) => runWfa(args, work, { WFA_URL: service.url, WFA_API_KEY: service.adminKey });

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-cli-audit-'));
  service = await spawnService('cli-audit', work, {});
  pool = new pg.Pool({ connectionString: service.databaseUrl, max: 2 });
}, 150_000);

afterAll(async () => {
  await pool?.end();
  await service?.stop();
  await rm(work, { recursive: true, force: true });
});

describe('wfa audit, spawned', () => {
  it('lists a change with who made it, verifies the chain, and exports the selection as NDJSON', async () => {
    expect((await wfa(['policy', 'set', '--approval', 'above', '--threshold', '7'])).code).toBe(0);
    const listed = await wfa(['audit', '--action', 'policy.update']);
    expect(listed.code, listed.err).toBe(0);
    const [header, line] = listed.out.trim().split('\n');
    expect(header).toMatch(/^SEQ\s+AT\s+ACTOR\s+ACTION\s+TARGET\s+OUTCOME$/);
    expect(line).toMatch(/admin \(ADMIN_API_KEY\)\s+policy\.update\s+policy\s+200$/);

    const json = await wfa(['--json', 'audit', '--action', 'policy.*', '--limit', '1']);
    const page = JSON.parse(json.out) as { items: { detail: unknown }[] };
    expect(page.items[0]!.detail).toEqual({ approval: 'above', approvalThreshold: 7, approvalTtlSeconds: 604800 });

    const verified = await wfa(['audit', 'verify']);
    expect(verified.code).toBe(0);
    expect(verified.out).toMatch(/^The chain holds: \d+ entries checked$/m);

    const file = path.join(work, 'audit.ndjson');
    const exported = await wfa(['audit', 'export', '--output', file]);
    expect(exported.code, exported.err).toBe(0);
    const lines = (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { seq: number; action: string });
    expect(lines.map((l) => l.action)).toContain('policy.update');
    // Newest first, every entry once.
    expect(lines.map((l) => l.seq)).toEqual([...lines.map((l) => l.seq)].sort((a, b) => b - a));
  });

  it('follows the trail: a change made meanwhile is printed as it is written', async () => {
    const following = startWfa(['audit', '--follow'], work, { WFA_URL: service.url, WFA_API_KEY: service.adminKey });
    try {
      await following.waitFor(/SEQ\s+AT/);
      expect((await wfa(['policy', 'set', '--ttl', '3600'])).code).toBe(0);
      await following.waitFor(/policy\.update\s+policy\s+200\n[^]*policy\.update\s+policy\s+200/);
    } finally {
      following.child.kill('SIGINT');
    }
    expect((await following.done).code).toBe(0);
  });

  it("exports a plan's jobs as CSV", async () => {
    // Plan ids name Temporal workflows: one of its own on a Temporal that other runs used.
    const planId = `audit-export-${randomBytes(4).toString('hex')}`;
    expect((await wfa(['policy', 'set', '--approval', 'never'])).code).toBe(0);
    const def = path.join(work, 'def.json');
    await writeFile(def, JSON.stringify(approvalWithNote('audit-def')));
    expect((await wfa(['definitions', 'publish', def])).code).toBe(0);
    const { rows } = await pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'audit-def'",
    );
    await seedInstances(pool, { definitionVersionId: rows[0]!.id, count: 25, variables: { amount: 0 } });
    const plan = path.join(work, 'plan.json');
    await writeFile(
      plan,
      JSON.stringify({
        alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
        filter: { definitionIds: ['audit-def'] },
      }),
    );
    const submitted = await wfa(['plans', 'submit', plan, '--id', planId, '--watch']);
    expect(submitted.code, submitted.out + submitted.err).toBe(0);
    const csv = await wfa(['plans', 'export', planId, '--format', 'csv']);
    expect(csv.code, csv.err).toBe(0);
    const [header, ...jobs] = csv.out.trim().split('\n');
    expect(header).toMatch(/^id,planId,workflowInstanceId,status,/);
    expect(jobs).toHaveLength(25);
    // The submit is in the trail with the plan as its target.
    const trail = JSON.parse((await wfa(['--json', 'audit', '--target', planId])).out) as {
      items: { action: string; outcome: number }[];
    };
    expect(trail.items.map((e) => [e.action, e.outcome])).toEqual([['plan.submit', 202]]);
  });
});
