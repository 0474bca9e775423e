import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import {
  embeddedEnv,
  exitWithin,
  noneLeft,
  processTable,
  processTree,
  spawnKept,
  waitUntil,
} from '../support/processes.js';
import { orderApproval } from '../support/workflows.js';

/**
 * The first start on a new machine, as a newcomer runs it: `npm start` with no Temporal CLI in the cache
 * (an empty XDG_CACHE_HOME, so Go builds the dev server's binary, which takes minutes). The API, its docs
 * and the stored data answer within 30 s meanwhile; the banner's generated password signs the user `admin` in
 * to the console; what needs Temporal says it waits for the build; a Ctrl-C in the middle of the build stops
 * everything, the build's processes included, and the next start says the build was interrupted.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const folders: string[] = [];
afterAll(async () => {
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
});

describe('the first npm start on a new machine', () => {
  it('answers within 30 s while Go builds Temporal, says what waits for it, and stops mid-build leaving nothing', async () => {
    // The data folder itself (as root, the service lets the postgres user enter it), and an empty cache.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'wfa-first-start-'));
    const cache = await mkdtemp(path.join(os.tmpdir(), 'wfa-first-start-cache-'));
    folders.push(dir, cache);
    const ports = { api: await freePort(), postgres: await freePort(), temporal: await freePort() };
    const env = embeddedEnv(dir, ports, { XDG_CACHE_HOME: cache });
    delete env.TEMPORAL_CLI_PATH;
    const started = Date.now();
    const service = spawnKept('npm', ['start'], { cwd: ROOT, env, detached: true });
    try {
      const base = `http://127.0.0.1:${ports.api}`;
      await waitUntil(
        '/health/live',
        async () => ((await fetch(`${base}/health/live`)).ok ? true : undefined),
        60_000,
        service,
      );
      const liveAfter = Date.now() - started;
      expect(liveAfter, `/health/live answered ${liveAfter} ms after npm start`).toBeLessThan(30_000);
      // It says where the minutes go.
      await waitUntil('the banner', async () => (service.out().includes('Ctrl-C stops everything') ? true : undefined));
      expect(service.out()).toContain('building its dev server with Go');
      // It let the newcomer into the console: the user admin, with a password shown once in the banner.
      const password = /Username: admin {4}Password: (\S+)/.exec(service.out())?.[1];
      expect(password, service.tail()).toBeTruthy();
      const signIn = await fetch(`${base}/console/sign-in`, {
        method: 'POST',
        headers: { origin: base, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ username: 'admin', password: password! }),
        redirect: 'manual',
      });
      expect(signIn.status).toBe(303);
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
      const plans = await fetch(`${base}/console/plans`, { headers: { cookie } });
      expect(plans.status).toBe(200);
      expect(await plans.text()).toContain('<h1>Plans</h1>');
      const signedInAfter = Date.now() - started - liveAfter;
      expect(signedInAfter, `signed in ${signedInAfter} ms after /health/live answered`).toBeLessThan(60_000);
      // Only its hash is stored: the password is in no file of the data folder, and no log line.
      expect(
        service
          .out()
          .split('\n')
          .filter((l) => l.startsWith('{') && l.includes(password!)),
      ).toEqual([]);
      const ready = await fetch(`${base}/health/ready`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({
        checks: { postgres: 'ok', temporal: 'unavailable' },
        detail: expect.stringContaining('being built with Go'),
      });
      // The API works meanwhile: a definition, an instance, a plan that waits Pending for Temporal.
      const key = /ApiKey (wfa_\S+)/.exec(service.out())![1]!;
      const call = (method: string, p: string, body?: unknown) =>
        fetch(`${base}${p}`, {
          method,
          headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      expect((await call('POST', '/workflow-definitions', orderApproval())).status).toBe(201);
      expect((await call('POST', '/workflow-instances', { definitionId: 'order-approval' })).status).toBe(202);
      const submitted = await call('POST', '/alterations/submit', {
        id: 'waits-for-temporal',
        alterations: [{ type: 'ModifyVariable', variableId: 'approved', value: true }],
        filter: { definitionIds: ['order-approval'] },
      });
      expect(submitted.status).toBe(202);
      const plan = (await (await call('GET', '/alterations/waits-for-temporal')).json()) as {
        plan: { status: number };
      };
      expect(plan.plan.status).toBe(0);
      expect((await fetch(`${base}/docs`)).status).toBe(200);
      // The build is under way: go's own processes are the service's descendants.
      const goBuilding = () => {
        const table = processTable();
        return processTree(service.child.pid!).some((pid) =>
          / install github\.com\/temporalio\/cli/.test(table.get(pid)?.cmdline ?? ''),
        );
      };
      await waitUntil("go's build", async () => (goBuilding() ? true : undefined), 30_000, service);
      const tree = processTree(service.child.pid!);
      process.kill(-service.child.pid!, 'SIGINT');
      const exit = await exitWithin(service, 30_000);
      expect(exit, service.tail()).toEqual({ code: 0, signal: null });
      expect(service.out()).toContain('"msg":"stopped"');
      expect(await noneLeft(tree, dir)).toEqual([]);
      // The stopped build left no work folder, only the mark that it was stopped.
      expect(await readdir(path.join(cache, 'wf-alter', 'go-work'))).toEqual(['interrupted']);
    } finally {
      if (!service.done()) process.kill(-service.child.pid!, 'SIGKILL');
    }
    // The next start says so, and builds from the beginning (stopped again as soon as it has said it).
    const again = spawnKept('npm', ['start'], { cwd: ROOT, env, detached: true });
    try {
      await waitUntil(
        'the interrupted build to be named',
        async () => (again.err().includes('An earlier build was interrupted before it ended') ? true : undefined),
        60_000,
        again,
      );
      // The password was shown once: a later start makes no user and shows none.
      await waitUntil('the banner', async () => (again.out().includes('Ctrl-C stops everything') ? true : undefined));
      expect(again.out()).not.toContain('Password:');
      process.kill(-again.child.pid!, 'SIGINT');
      expect(await exitWithin(again, 30_000), again.tail()).toEqual({ code: 0, signal: null });
    } finally {
      if (!again.done()) process.kill(-again.child.pid!, 'SIGKILL');
    }
  }, 180_000);
});
