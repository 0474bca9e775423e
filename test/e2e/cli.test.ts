import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SpawnedService, spawnService } from '../support/spawned-service.js';
import { runWfa, startWfa } from '../support/wfa.js';
import { seedInstances, withoutWorkflows } from '../support/seed.js';
import { approvalWithNote, chain, event, fault, writeLine } from '../support/workflows.js';

const run = randomBytes(4).toString('hex');
let adminKey: string;
const password = `cli-password-${run}`;

let service: SpawnedService;
let url: string;
let work: string;
let pool: pg.Pool;

/** The CLI as a user runs it (test/support/wfa.ts), against the spawned service. */
const wfa = (args: string[], env: NodeJS.ProcessEnv = {}, stdin?: string) =>
  runWfa(args, work, { WFA_URL: url, WFA_API_KEY: adminKey, ...env }, stdin);

async function file(name: string, body: unknown): Promise<string> {
  const p = path.join(work, name);
  await writeFile(p, typeof body === 'string' ? body : JSON.stringify(body));
  return p;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-cli-'));
  // A trigger over more than 2 instances is recorded (the trigger test below).
  service = await spawnService('cli', work, {
    ADMIN_PASSWORD: password,
    ALTERATION_BATCH_SIZE: '50',
    TRIGGER_INLINE_INSTANCES: '2',
  });
  url = service.url;
  adminKey = service.adminKey;
  pool = new pg.Pool({ connectionString: service.databaseUrl, max: 2 });
}, 150_000);

afterAll(async () => {
  await pool?.end();
  await service?.stop();
  await rm(work, { recursive: true, force: true });
});

describe('wfa, spawned against a running service', () => {
  it('publishes a definition, then submits a plan with --watch that ends 0 with the final counts', async () => {
    const published = await wfa(['definitions', 'publish', await file('def.json', approvalWithNote('cli-def'))]);
    expect(published.err).toBe('');
    expect(published.code).toBe(0);
    expect(published.out).toMatch(/Published cli-def version 1/);
    const { rows } = await pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'cli-def'",
    );
    await seedInstances(pool, { definitionVersionId: rows[0]!.id, count: 300, variables: { amount: 0 } });

    const plan = await file('plan.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 5 }],
      filter: { definitionIds: ['cli-def'] },
    });
    const submitted = await wfa(['plans', 'submit', plan, '--id', `cli-ok-${run}`, '--watch']);
    expect(submitted.err).toBe('');
    expect(submitted.code).toBe(0);
    expect(submitted.out).toMatch(/Submitted plan cli-ok-/);
    expect(submitted.out.trim().split('\n').at(-1)).toBe('Completed: 300 completed, 0 failed, 0 cancelled of 300');

    const shown = await wfa(['--json', 'plans', 'show', `cli-ok-${run}`]);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.out)).toMatchObject({
      id: `cli-ok-${run}`,
      status: 4,
      jobCounts: { total: 300, completed: 300 },
    });
    const human = await wfa(['plans', 'show', `cli-ok-${run}`]);
    expect(human.out).toContain('█'.repeat(40));
    expect(human.out).toContain('completed 300');
  });

  it('shows stored text with escape sequences as text: a variable and a failed job log set no terminal state', async () => {
    const hostile = '\u001b]0;PWNED\u0007\u001b[2J\u001b[31mFAKE: all good\u001b[0m';
    expect(
      (await wfa(['definitions', 'publish', await file('hostile-def.json', approvalWithNote('cli-hostile'))])).code,
    ).toBe(0);
    const { rows } = await pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'cli-hostile'",
    );
    const [id] = await seedInstances(pool, {
      definitionVersionId: rows[0]!.id,
      count: 1,
      variables: { note: hostile },
      namePrefix: 'hostile-',
    });
    const shown = await wfa(['instances', 'show', id!]);
    expect(shown.code).toBe(0);
    expect(shown.out).not.toContain('\u001b[');
    expect(shown.out).toContain('\\u001b]0;PWNED');
    const json = await wfa(['--json', 'instances', 'show', id!]);
    expect(JSON.parse(json.out).variables.find((v: { id: string }) => v.id === 'note').value).toBe(hostile);
  });

  it('heads the sections of an instance it shows: no variables said in words, its incidents under a heading', async () => {
    const plain = chain('cli-plain', [writeLine('start', 'hello'), event('wait', 'go')]);
    expect((await wfa(['definitions', 'publish', await file('plain-def.json', plain)])).code).toBe(0);
    const { rows } = await pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'cli-plain'",
    );
    const [id] = await seedInstances(pool, { definitionVersionId: rows[0]!.id, count: 1, namePrefix: 'bare-' });
    // Written as the seed is, with the outbox off: no workflow is started for the row.
    await withoutWorkflows(
      pool,
      `UPDATE workflow_instances SET sub_status = 'Faulted', incidents = $2::jsonb WHERE id = $1`,
      [
        id,
        JSON.stringify([
          {
            activityId: 'charge',
            activityType: 'Elsa.Fault',
            message: 'card declined',
            timestamp: new Date().toISOString(),
          },
        ]),
      ],
    );
    const shown = await wfa(['instances', 'show', id!]);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('No variables.');
    expect(shown.out).not.toContain('(none)');
    expect(shown.out).toMatch(
      /Incidents:\nACTIVITYID\s+ACTIVITYTYPE\s+MESSAGE\s+TIMESTAMP\ncharge\s+Elsa\.Fault\s+card declined/,
    );
  });

  it('exits 1 from --watch when jobs failed, and lists them with --failed', async () => {
    const plan = await file('bad-var.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'nope', value: 1 }],
      filter: { definitionIds: ['cli-def'] },
    });
    const r = await wfa(['plans', 'submit', plan, '--id', `cli-fail-${run}`, '--watch']);
    expect(r.code).toBe(1);
    expect(r.out).toContain('Completed — all 300 jobs failed: 0 completed, 300 failed, 0 cancelled of 300');
    const jobs = await wfa(['--json', 'plans', 'jobs', `cli-fail-${run}`, '--failed', '--limit', '5']);
    expect(jobs.code).toBe(0);
    const page = JSON.parse(jobs.out) as { items: { status: number }[] };
    expect(page.items).toHaveLength(5);
    expect(page.items.every((j) => j.status === 3)).toBe(true);
  });

  it('steers a plan: a canary that pauses, a new rate, resume, watch to the end, revert, and a 409 once finished', async () => {
    const plan = await file('steer.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 6 }],
      filter: { definitionIds: ['cli-def'] },
    });
    const planId = `cli-steer-${run}`;
    const submitted = await wfa(['plans', 'submit', plan, '--id', planId, '--canary', '50', '--rate', '500']);
    expect(submitted.err).toBe('');
    expect(submitted.out.trim()).toBe(`Submitted plan ${planId}`);
    let shown: { status: number; pauseReason: string | null; jobCounts: { completed: number } } | undefined;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
      shown = JSON.parse((await wfa(['--json', 'plans', 'show', planId])).out);
      if (shown?.status === 7) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(shown).toMatchObject({ status: 7, pauseReason: 'canary', jobCounts: { completed: 50 } });
    const human = await wfa(['plans', 'show', planId]);
    expect(human.out).toContain('Paused (canary)');
    expect(human.out).toContain('rollout: rate 500/s, canary 50');

    const faster = await wfa(['plans', 'rollout', planId, '--rate', '2000']);
    expect(faster.code).toBe(0);
    expect(faster.out).toContain('rate 2,000/s');
    const resumed = await wfa(['plans', 'resume', planId]);
    expect(resumed.out.trim()).toBe(`Resumed plan ${planId}: Running`);
    const watched = await wfa(['plans', 'watch', planId]);
    expect(watched.code).toBe(0);
    expect(watched.out.trim().split('\n').at(-1)).toBe('Completed: 300 completed, 0 failed, 0 cancelled of 300');

    const reverted = await wfa(['plans', 'revert', planId, '--id', `${planId}-undo`, '--watch']);
    expect(reverted.err).toBe('');
    expect(reverted.code).toBe(0);
    expect(reverted.out).toContain(`Reverting plan ${planId} with plan ${planId}-undo`);
    expect(reverted.out.trim().split('\n').at(-1)).toBe('Completed: 300 completed, 0 failed, 0 cancelled of 300');
    const { rows } = await pool.query<{ amount: string; n: number }>(
      "SELECT variables->>'amount' AS amount, count(*)::int AS n FROM workflow_instances WHERE definition_id = 'cli-def' GROUP BY 1",
    );
    expect(rows).toEqual([{ amount: '5', n: 300 }]);

    const late = await wfa(['plans', 'pause', planId]);
    expect(late.code).not.toBe(0);
    expect(late.err).toContain(`Plan ${planId} is already Completed`);
    const again = await wfa(['plans', 'revert', planId]);
    expect(again.err).toContain(`already reverted by plan ${planId}-undo`);
  }, 90_000);

  it('triggers an event for one instance, then for the rest, saying when their resumption was only recorded', async () => {
    const eventName = `cli-go-${run}`;
    const def = chain(`cli-wait-${run}`, [
      writeLine('start', 'started'),
      event('wait', eventName),
      writeLine('end', 'went'),
    ]);
    expect((await wfa(['definitions', 'publish', await file('wait.json', def)])).code).toBe(0);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const started = await wfa(['instances', 'start', `cli-wait-${run}`]);
      expect(started.code, started.err).toBe(0);
      ids.push(started.out.trim());
    }
    const one = await wfa(['trigger', eventName, '--instance', ids[0]!]);
    expect(one.err).toBe('');
    expect(one.out.trim()).toBe('Resumed 1 instance(s)');
    // Three waiting, more than the 2 the service resumes inline: recorded, and said so.
    const rest = await wfa(['trigger', eventName]);
    expect(rest.out.trim()).toBe('Resuming 3 instance(s): recorded, the workers resume them next');
    expect(JSON.parse((await wfa(['--json', 'trigger', eventName])).out)).toEqual({ resumedWorkflowInstanceIds: [] });
    for (const id of ids) {
      for (let tries = 0; ; tries++) {
        const shown = JSON.parse((await wfa(['--json', 'instances', 'show', id])).out) as { subStatus: string };
        if (shown.subStatus === 'Finished') break;
        expect(tries, `${id} to finish`).toBeLessThan(60);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  });

  it('names the offending field of a bad file, and says when a file is not JSON', async () => {
    const bad = await wfa(['plans', 'submit', await file('bad.json', { alterations: [{ type: 'Nope' }], filter: {} })]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^error: .*\(HTTP 400\)/);
    expect(bad.err).toContain('/alterations/0');
    expect(bad.err).not.toMatch(/\bat .*\.ts:\d+/);
    const notJson = await wfa(['plans', 'submit', await file('broken.json', '{"alterations": [')]);
    expect(notJson.code).toBe(2);
    expect(notJson.err).toMatch(/broken\.json is not JSON/);
  });

  it('signs in, keeps the tokens in a 0600 file, and uses them', async () => {
    const login = await wfa(['login', '--username', 'admin'], { WFA_API_KEY: '' }, `${password}\n`);
    expect(login.err).toBe('');
    expect(login.code).toBe(0);
    const credentials = path.join(work, 'config', 'wfa', 'credentials.json');
    expect((await stat(credentials)).mode & 0o777).toBe(0o600);
    const list = await wfa(['--json', 'plans', 'list'], { WFA_API_KEY: '' });
    expect(list.code).toBe(0);
    expect((JSON.parse(list.out) as { items: { id: string }[] }).items.map((p) => p.id)).toContain(`cli-ok-${run}`);
    // Another server (a mistyped --url, a WFA_URL left from another project) gets none of them, even when
    // the access token has expired and a refresh would be due.
    const heard: string[] = [];
    const other = createHttpServer((req, res) => {
      heard.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
      res.writeHead(401).end();
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const elsewhere = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
    try {
      for (const expired of [false, true]) {
        if (expired) {
          const stored = JSON.parse(await readFile(credentials, 'utf8')) as Record<string, unknown>;
          await writeFile(credentials, JSON.stringify({ ...stored, accessTokenExpiresAt: 0 }), { mode: 0o600 });
        }
        for (const env of [{ WFA_URL: elsewhere }, {}]) {
          const args = 'WFA_URL' in env ? ['plans', 'list'] : ['--url', elsewhere, 'plans', 'list'];
          const r = await wfa(args, { WFA_API_KEY: '', ...env });
          expect(r.code).toBe(2);
          expect(r.err).toContain(`Not signed in to ${elsewhere}: the stored sign-in is for ${url}`);
        }
      }
      // Nor does a sign-out aimed at it (with WFA_API_KEY set too): the session is revoked where it lives.
      const out = await wfa(['logout'], { WFA_URL: elsewhere });
      expect(out.code).toBe(0);
      expect(heard).toEqual([]);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
    // Signed out: the stored session was revoked at its own server, and the file is gone.
    expect((await wfa(['plans', 'list'], { WFA_API_KEY: '' })).code).toBe(2);
    await expect(stat(credentials)).rejects.toThrow();
    const login2 = await wfa(['login', '--username', 'admin'], { WFA_API_KEY: '' }, `${password}\n`);
    expect(login2.code).toBe(0);
    const wrong = await wfa(['login', '--password', 'wrong-password'], { WFA_API_KEY: '' });
    expect(wrong.code).toBe(1);
    expect(wrong.err).toMatch(/^error: /);
  });

  it('says when every job of a Completed plan failed, in show, list and watch', async () => {
    const shown = await wfa(['plans', 'show', `cli-fail-${run}`]);
    expect(shown.out.split('\n')[0]).toBe(`cli-fail-${run}  Completed — all 300 jobs failed`);
    const listed = await wfa(['plans', 'list', '--all']);
    // The list names each plan's alteration count and types (the summary carries no alterations).
    expect(listed.out).toMatch(/^ID +STATUS +ALTERATIONS +DONE +FAILED +TOTAL +CREATED/);
    expect(listed.out).toMatch(
      new RegExp(`cli-fail-${run} +Completed — all 300 jobs failed +1: ModifyVariable +0 +300 +300`),
    );
    expect(listed.out).toMatch(new RegExp(`cli-ok-${run} +Completed +1: ModifyVariable +300 +0 +300`));
    const watched = await wfa(['plans', 'watch', `cli-fail-${run}`]);
    expect(watched.code).toBe(1);
    expect(watched.out.trim().split('\n')).toEqual([
      'Completed — all 300 jobs failed: 0 completed, 300 failed, 0 cancelled of 300',
      `  see them: wfa plans jobs cli-fail-${run} --failed`,
    ]);
  });

  it('pages instances: a page and the command for the next, --after, and --all streaming every page', async () => {
    const args = ['instances', 'list', '--definition', 'cli-def', '--limit', '120'];
    const first = await wfa(args);
    expect(first.code).toBe(0);
    const rows = (out: string) => out.trim().split('\n').slice(1);
    expect(first.out.split('\n')[0]).toMatch(/^ID +DEFINITION +STATUS +CORRELATION +INCIDENTS +UPDATED$/);
    expect(rows(first.out)).toHaveLength(120);
    expect(rows(first.out)[0]).toMatch(/^\S+ +cli-def v1 +Running\/Suspended +seed-300 +0 /);
    const hint = /^more: wfa instances list --definition cli-def --limit 120 --after (\S+)\n$/.exec(first.err);
    expect(hint, first.err).not.toBeNull();

    const second = await wfa([...args, '--after', hint![1]!]);
    expect(rows(second.out)).toHaveLength(120);
    expect(rows(second.out)[0]).toContain('seed-180');
    const third = await wfa([...args, '--after', /--after (\S+)/.exec(second.err)![1]!]);
    expect(rows(third.out)).toHaveLength(60);
    expect(third.err).toBe('');

    const all = await wfa([...args, '--all']);
    expect(all.err).toBe('');
    expect(all.out.match(/^ID /gm)).toHaveLength(1);
    const ids = rows(all.out).map((l) => l.split(' ')[0]);
    expect(new Set(ids).size).toBe(300);
    const json = await wfa(['--json', ...args, '--all']);
    const items = json.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; correlationId: string });
    expect(items.map((i) => i.id)).toEqual(ids);
    expect(items[0]!.correlationId).toBe('seed-300');

    const bad = await wfa([...args, '--after', 'not-a-cursor']);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^error: .*cursor.* \(HTTP 400\)/);
  });

  it("pages a plan's jobs and the plans the same way", async () => {
    const jobs = await wfa(['plans', 'jobs', `cli-fail-${run}`, '--failed', '--limit', '250']);
    expect(jobs.out.trim().split('\n')).toHaveLength(251);
    const cursor = new RegExp(`^more: wfa plans jobs cli-fail-${run} --failed --limit 250 --after (\\S+)\\n$`).exec(
      jobs.err,
    );
    expect(cursor, jobs.err).not.toBeNull();
    const rest = await wfa(['plans', 'jobs', `cli-fail-${run}`, '--failed', '--limit', '250', '--after', cursor![1]!]);
    expect(rest.out.trim().split('\n')).toHaveLength(51);
    const all = await wfa(['plans', 'jobs', `cli-fail-${run}`, '--limit', '100', '--all']);
    expect(all.out.trim().split('\n')).toHaveLength(301);
    expect(all.err).toBe('');

    const plans = await wfa(['plans', 'list', '--limit', '1']);
    expect(plans.out.trim().split('\n')).toHaveLength(2);
    expect(plans.err).toMatch(/^more: wfa plans list --limit 1 --after \S+\n$/);
  });

  it("gives the service's problem document as JSON with --json, on standard error", async () => {
    const r = await wfa(['--json', 'plans', 'show', `no-such-plan-${run}`]);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    const { error } = JSON.parse(r.err) as { error: Record<string, unknown> };
    expect(error).toMatchObject({ type: '/problems/not-found', title: 'Not Found', status: 404 });
    expect(error.detail).toContain(`no-such-plan-${run}`);
    expect(error.traceId).toEqual(expect.any(String));
  });

  it('asks for the password on a terminal without showing it', async () => {
    const login = startWfa(['login', '--username', 'admin'], work, { WFA_URL: url, WFA_API_KEY: '' }, { tty: true });
    await login.waitFor(`Password for admin at ${url}: `);
    // Typed with a slip: a wrong last key, deleted with Backspace.
    login.child.stdin.write(`${password}x\u007f\r`);
    const r = await login.done;
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain(`Signed in to ${url} as admin`);
    expect(r.out).not.toContain(password);
    const list = await wfa(['--json', 'plans', 'list', '--limit', '1'], { WFA_API_KEY: '' });
    expect(list.code).toBe(0);

    const piped = await wfa(['login'], { WFA_API_KEY: '' }, `${password}\n`);
    expect(piped.code).toBe(0);
    expect(piped.out).not.toContain('Password');
    const none = await wfa(['login'], { WFA_API_KEY: '' }, '');
    expect(none.code).toBe(2);
    expect(none.err).toBe('error: No password: pass --password, set WFA_PASSWORD, or pipe it on standard input\n');
  });

  it('leaves a watch on Ctrl-C: the plan goes on, the line after the bar says how to watch it again, exit 130', async () => {
    expect(
      (await wfa(['definitions', 'publish', await file('watch-def.json', approvalWithNote('cli-watch'))])).code,
    ).toBe(0);
    const { rows } = await pool.query<{ id: string }>(
      "SELECT id FROM workflow_definitions WHERE definition_id = 'cli-watch'",
    );
    await seedInstances(pool, { definitionVersionId: rows[0]!.id, count: 200, variables: { amount: 0 } });
    const plan = await file('slow.json', {
      alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 1 }],
      filter: { definitionIds: ['cli-watch'] },
    });
    const planId = `cli-slow-${run}`;
    expect((await wfa(['plans', 'submit', plan, '--id', planId, '--rate', '5'])).code).toBe(0);
    const again = `the plan goes on; watch it again with: wfa plans watch ${planId}`;

    const piped = startWfa(['plans', 'watch', planId], work, { WFA_URL: url, WFA_API_KEY: adminKey });
    await piped.waitFor(/\/200 .*· Running/);
    piped.child.kill('SIGINT');
    const p = await piped.done;
    expect(p.code).toBe(130);
    expect(p.err).toBe(`${again}\n`);

    const tty = startWfa(['plans', 'watch', planId], work, { WFA_URL: url, WFA_API_KEY: adminKey }, { tty: true });
    // eslint-disable-next-line no-control-regex
    await tty.waitFor(/\r\u001b\[2K[█▓░]+ [\d,]+\/200 /);
    tty.child.stdin.write('\u0003');
    const t = await tty.done;
    expect(t.code).toBe(130);
    const lines = t.out.split(/\r?\n/);
    expect(lines.at(-2)).toBe(again);
    // The bar's line ends where the terminal echoed the Ctrl-C; the message has a line of its own.
    expect(lines.at(-3)).toMatch(/\/200 .*· Running(\^C)?$/);

    const shown = JSON.parse((await wfa(['--json', 'plans', 'show', planId])).out) as { status: number };
    expect(shown.status).toBe(3);
    expect((await wfa(['plans', 'cancel', planId])).code).toBe(0);
  }, 60_000);
});

/** What a newcomer's first run tripped on (shared/reports/newcomer-2026-11-25.md, "Error messages"). */
describe('wfa, where a newcomer stumbled', () => {
  const definitionId = `cli-newcomer-${run}`;
  const alterations = [{ type: 'ModifyVariable', variableId: 'amount', value: 3 }];
  let ids: string[];

  beforeAll(async () => {
    expect(
      (await wfa(['definitions', 'publish', await file('newcomer.json', approvalWithNote(definitionId))])).code,
    ).toBe(0);
    const { rows } = await pool.query<{ id: string }>('SELECT id FROM workflow_definitions WHERE definition_id = $1', [
      definitionId,
    ]);
    ids = await seedInstances(pool, { definitionVersionId: rows[0]!.id, count: 5, variables: { amount: 3 } });
  });

  it('dry-runs the file it submits (its filter), a bare filter alike, and names a plan file without a filter', async () => {
    const filter = { definitionIds: [definitionId] };
    const plan = await wfa(['plans', 'dry-run', await file('newcomer-plan.json', { alterations, filter })]);
    expect(plan.err).toBe('');
    expect(plan.out.trim().split('\n')).toEqual(['5 instances match', ...ids]);
    const bare = await wfa(['plans', 'dry-run', await file('newcomer-filter.json', filter)]);
    expect(bare.out).toBe(plan.out);

    const noFilter = await wfa(['plans', 'dry-run', await file('newcomer-no-filter.json', { alterations })]);
    expect(noFilter.code).toBe(2);
    expect(noFilter.err).toMatch(/^error: \S+newcomer-no-filter\.json is a plan without a filter: add "filter"/);
    expect(noFilter.err).not.toContain('Unknown property');
  });

  it('says why an empty filter matches nothing, naming emptyFilterSelectsAll, in dry-run, preview and submit', async () => {
    const why =
      'the filter has no constraint, and a filter without one selects nothing unless it sets "emptyFilterSelectsAll": true';
    for (const body of [{}, { alterations, filter: {} }, { definitionIds: [], searchTerm: '', hasIncidents: null }]) {
      const r = await wfa(['plans', 'dry-run', await file('newcomer-empty.json', body)]);
      expect(r.code).toBe(0);
      expect(r.out.trim()).toBe(`0 instances match: ${why} (so that a mistake never selects every instance)`);
    }
    // A filter that has a constraint and matches nothing says nothing more; --json stays the API's answer.
    const none = await wfa(['plans', 'dry-run', await file('newcomer-none.json', { definitionIds: ['nope'] })]);
    expect(none.out.trim()).toBe('0 instances match');
    const json = await wfa(['--json', 'plans', 'dry-run', await file('newcomer-empty.json', {})]);
    expect(JSON.parse(json.out)).toEqual({ workflowInstanceIds: [] });

    const empty = await file('newcomer-empty-plan.json', { alterations, filter: {} });
    const preview = await wfa(['plans', 'preview', empty]);
    expect(preview.out.trim()).toBe(`0 instances match: ${why} (so that a mistake never selects every instance)`);
    const submitted = await wfa(['plans', 'submit', empty, '--id', `cli-empty-${run}`, '--watch']);
    expect(submitted.code).toBe(0);
    expect(submitted.err).toContain(`note: the plan will alter no instance: ${why}`);
    expect(submitted.out.trim().split('\n').at(-1)).toBe('Completed: 0 completed, 0 failed, 0 cancelled of 0');
  });

  it('says "no change" for a previewed instance that the alterations would leave as it is', async () => {
    const filter = { definitionIds: [definitionId] };
    const same = await wfa(['plans', 'preview', await file('newcomer-same.json', { alterations, filter })]);
    expect(same.err).toBe('');
    expect(same.out.trim().split('\n')).toEqual([
      '5 instances match; the first 5:',
      ...ids.map((id) => `  ${id}  ok: no change`),
    ]);
    const changed = await wfa([
      'plans',
      'preview',
      await file('newcomer-change.json', { alterations: [{ ...alterations[0], value: 4 }], filter }),
      '--limit',
      '1',
    ]);
    expect(changed.out.trim().split('\n')).toEqual([
      '5 instances match; the first 1:',
      `  ${ids[0]}  ok`,
      '    /variables/amount: 3 → 4',
    ]);
  });

  it("finds the incident groups and counts, retries what a plan did not get done, and shows an instance's changes", async () => {
    const fragile = chain('cli-fragile', [writeLine('start', 'go'), fault('boom', 'Gateway timed out')]);
    expect((await wfa(['definitions', 'publish', await file('fragile.json', fragile)])).code).toBe(0);
    const started: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await wfa(['instances', 'start', 'cli-fragile']);
      expect(r.code, r.err).toBe(0);
      started.push(r.out.trim());
    }
    const groups = await wfa(['incidents', '--definition', 'cli-fragile']);
    expect(groups.code, groups.err).toBe(0);
    expect(groups.out).toMatch(/^3\s+cli-fragile v1\s+boom \(Elsa\.Fault\)\s+Gateway timed out/m);
    const counts = await wfa(['definitions', 'counts', 'cli-fragile']);
    expect(counts.out).toMatch(/^boom\s+Elsa\.Fault\s+0\s+0\s+3\s*$/m);
    // The command's own --version, not the program's.
    const ofVersion = await wfa(['definitions', 'counts', 'cli-fragile', '--version', '1']);
    expect(ofVersion.out).toMatch(/^boom\s+Elsa\.Fault\s+0\s+0\s+3\s*$/m);
    expect((await wfa(['definitions', 'counts', 'cli-fragile', '--version', '2'])).code).toBe(1);

    // "wait" is no activity of cli-fragile: every job fails, and the retry fails them again.
    const planId = `cli-cancel-${run}`;
    const plan = await file('cancel.json', {
      id: planId,
      alterations: [{ type: 'CancelActivity', activityId: 'wait' }],
      filter: { incidentFilters: [{ messageContains: 'gateway' }] },
    });
    expect((await wfa(['plans', 'submit', plan, '--watch'])).code).toBe(1);
    const retried = await wfa(['retry-failed', planId, '--id', `cli-retry-${run}`, '--watch']);
    expect(retried.out).toContain(`Retrying what plan ${planId} did not get done with plan cli-retry-${run}`);
    expect(retried.code).toBe(1);
    const bad = await wfa(['retry-failed', planId, '--include', 'Skipped']);
    expect(bad.code).toBe(2);

    const changes = await wfa(['instances', 'changes', started[0]!]);
    expect(changes.code, changes.err).toBe(0);
    const planIds = changes.out
      .split('\n')
      .filter((l) => l.includes('CancelActivity'))
      .map((l) => l.split(/\s+/)[0]);
    expect(planIds).toEqual([`cli-retry-${run}`, planId]);

    // A retry of the faulted step, verified by --expect and --within: the step faults again, so none is verified.
    const verified = `cli-verify-${run}`;
    const schedule = await file('schedule.json', {
      id: verified,
      alterations: [{ type: 'ScheduleActivity', activityId: 'boom' }],
      filter: { definitionIds: ['cli-fragile'], incidentFilters: [{ activityId: 'boom' }] },
    });
    const submitted = await wfa([
      'plans',
      'submit',
      schedule,
      '--expect',
      '{"hasIncidents":false}',
      '--within',
      '1',
      '--watch',
    ]);
    expect(submitted.code).toBe(1);
    expect(submitted.out).toContain('verify within 1 s: 0 verified, 3 not verified, 0 pending');
    // Completed, but not what it was for: said wherever the plan's status is.
    expect(submitted.out).toContain('Completed — 3 not verified, of 3 jobs: 3 completed, 0 failed');
    expect((await wfa(['plans', 'show', verified])).out.split('\n')[0]).toBe(
      `${verified}  Completed — 3 not verified, of 3 jobs`,
    );
    const shown = await wfa(['plans', 'show', verified, '--json']);
    expect(JSON.parse(shown.out).verification).toMatchObject({
      expect: { hasIncidents: false },
      withinSeconds: 1,
    });
    const half = await wfa(['plans', 'submit', schedule, '--expect', '{"hasIncidents":false}']);
    expect(half.code).toBe(2);
    expect(half.err).toContain('--expect and --within go together');
  });

  it('prints its version with --version and -V', async () => {
    const { version } = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      const r = await runWfa([flag], work);
      expect(r).toMatchObject({ code: 0, out: `${version}\n`, err: '' });
    }
  });

  it('names the default tenant `default` in its tables, as the Temporal UI does, and keeps null in --json', async () => {
    const keyIn = async (tenantId: string) => {
      const res = await fetch(`${url}/identity/api-keys`, {
        method: 'POST',
        headers: { authorization: `ApiKey ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `cli-${tenantId}-${run}`, permissions: ['*'], tenantId }),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { key: string }).key;
    };
    const connection = (name: string) =>
      file(`${name}.json`, {
        name: `${name}-${run}`,
        connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
        connectionConfiguration: { baseUrl: 'http://x.example/' },
      });
    const keys = { '*': await keyIn('*'), acme: await keyIn(`acme-${run}`) };
    expect((await wfa(['connections', 'create', await connection('own')])).code).toBe(0);
    expect((await wfa(['connections', 'create', await connection('shared')], { WFA_API_KEY: keys['*'] })).code).toBe(0);
    expect((await wfa(['connections', 'create', await connection('acme')], { WFA_API_KEY: keys.acme })).code).toBe(0);

    const row = (out: string, name: string) => out.split('\n').find((l) => l.includes(`${name}-${run}`));
    const mine = await wfa(['connections', 'list']);
    expect(row(mine.out, 'own')).toMatch(/ default$/);
    expect(row(mine.out, 'shared')).toMatch(/ \*$/);
    expect(row(mine.out, 'acme')).toBeUndefined();
    const theirs = await wfa(['connections', 'list'], { WFA_API_KEY: keys.acme });
    expect(row(theirs.out, 'acme')).toMatch(new RegExp(` acme-${run}$`));
    const json = JSON.parse((await wfa(['--json', 'connections', 'list'])).out) as {
      items: { name: string; tenantId: string | null }[];
    };
    expect(json.items.find((c) => c.name === `own-${run}`)?.tenantId).toBeNull();
  });
});
