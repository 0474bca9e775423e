import { existsSync, readdirSync, statSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, stat, unlink } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import {
  embeddedEnv,
  type EmbeddedPorts,
  exitWithin,
  noneLeft,
  processTable,
  processTree,
  type Spawned,
  spawnKept,
} from '../support/processes.js';

/**
 * The service as a user runs it (`node --import tsx src/main.ts`) in embedded mode: its own Postgres and
 * Temporal dev server in a fresh DATA_DIR. Stops are checked by pid over the whole process tree.
 * 10 stops when CI or PROCESS_STOPS is set (PROCESS_STOPS=n for n), 3 otherwise, to keep the normal run short.
 */
const STOPS = Number(process.env.PROCESS_STOPS ?? (process.env.CI ? 10 : 3));
const ROOT = path.resolve(import.meta.dirname, '../..');
const isRoot = process.getuid?.() === 0;

const folders: string[] = [];
afterAll(async () => {
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
});

async function freshDataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'wfa-process-'));
  folders.push(dir);
  return dir;
}

type Ports = EmbeddedPorts;

async function freePorts(): Promise<Ports> {
  return { api: await freePort(), postgres: await freePort(), temporal: await freePort() };
}

type Service = Spawned;

function spawnService(dataDir: string, ports: Ports, extraEnv: NodeJS.ProcessEnv = {}, viaNpm = false): Service {
  // Embedded mode: the shared test servers are not this service's.
  const env = embeddedEnv(dataDir, ports, extraEnv);
  const [command, args] = viaNpm ? ['npm', ['start']] : [process.execPath, ['--import', 'tsx', 'src/main.ts']];
  return spawnKept(command, args as string[], { cwd: ROOT, env });
}

async function waitHealthy(service: Service, port: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline && !service.done()) {
    const status = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`service not healthy (exited: ${service.done()})\n${service.tail()}`);
}

const passwordOf = async (dataDir: string) => (await readFile(path.join(dataDir, 'postgres.password'), 'utf8')).trim();

async function connectAs(port: number, password: string): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  await client.connect();
  await client.end();
}

const mode = (file: string) => (statSync(file).mode & 0o777).toString(8);

describe('npm start in embedded mode', () => {
  it(
    `stops on SIGINT and SIGTERM with exit 0, "stopped" logged and no process left (${STOPS} stops); locks its Postgres down`,
    async () => {
      const dataDir = await freshDataDir();
      // mktemp -d: 0700 and, here, owned by whoever runs the tests (root in CI containers).
      expect(mode(dataDir)).toBe('700');
      const ports = await freePorts();
      for (let i = 0; i < STOPS; i++) {
        const signal = i % 2 === 0 ? 'SIGINT' : 'SIGTERM';
        const service = spawnService(dataDir, ports);
        await waitHealthy(service, ports.api);
        const pids = processTree(service.child.pid!);
        // The service, its Postgres (postmaster and backends) and its Temporal dev server at least.
        expect(pids.length, processTable().get(service.child.pid!)?.cmdline).toBeGreaterThanOrEqual(3);

        if (i === 0) {
          const password = await passwordOf(dataDir);
          expect(password.length).toBeGreaterThanOrEqual(24);
          await expect(connectAs(ports.postgres, 'postgres')).rejects.toMatchObject({ code: '28P01' });
          await connectAs(ports.postgres, password);
          expect(mode(path.join(dataDir, 'postgres.password'))).toBe('600');
          expect(mode(path.join(dataDir, 'postgres'))).toBe('700');
          expect(mode(path.join(dataDir, 'temporal.sqlite'))).toBe('600');
          expect(mode(path.join(dataDir, 'auth-signing-key'))).toBe('600');
          // Others may at most enter DATA_DIR (so that, as root, the postgres user reaches its folder).
          expect(statSync(dataDir).mode & 0o066).toBe(0);
          // Turn it into a folder the old code made: fixed password, no password file.
          const client = new pg.Client({
            host: '127.0.0.1',
            port: ports.postgres,
            user: 'postgres',
            password,
            database: 'postgres',
          });
          await client.connect();
          await client.query("ALTER ROLE postgres PASSWORD 'postgres'");
          await client.end();
          await unlink(path.join(dataDir, 'postgres.password'));
          await chmod(path.join(dataDir, 'temporal.sqlite'), 0o644); // as the old code left it
        }
        if (i === 1) {
          // The old folder works, and its fixed password was replaced by a generated one.
          const password = await passwordOf(dataDir);
          await expect(connectAs(ports.postgres, 'postgres')).rejects.toMatchObject({ code: '28P01' });
          await connectAs(ports.postgres, password);
          expect(mode(path.join(dataDir, 'temporal.sqlite'))).toBe('600');
        }

        service.child.kill(signal);
        const code = await exitWithin(service, 60_000).then((e) => (e === 'hung' ? e : e.code));
        expect(code, `${signal} stop ${i + 1}: ${service.err()}`).toBe(0);
        expect(service.out()).toContain('"msg":"stopped"');
        expect(await noneLeft(pids, dataDir), `${signal} stop ${i + 1}`).toEqual([]);
      }
    },
    STOPS * 90_000,
  );

  it('stops the same way when the signal goes to `npm start` (as Docker or a supervisor sends it)', async () => {
    const dataDir = await freshDataDir();
    const ports = await freePorts();
    const service = spawnService(dataDir, ports, {}, true);
    await waitHealthy(service, ports.api);
    const pids = processTree(service.child.pid!);
    service.child.kill('SIGTERM');
    const code = await exitWithin(service, 60_000).then((e) => (e === 'hung' ? e : e.code));
    expect(code, service.err()).toBe(0);
    expect(service.out()).toContain('"msg":"stopped"');
    expect(await noneLeft(pids, dataDir)).toEqual([]);
  }, 180_000);

  for (const [which, variable] of [
    ['api', 'PORT'],
    ['postgres', 'EMBEDDED_POSTGRES_PORT'],
    ['temporal', 'TEMPORAL_DEV_SERVER_PORT'],
  ] as const) {
    it(`refuses to start when ${variable} is taken, before printing or generating anything, leaving nothing running`, async () => {
      const dataDir = await freshDataDir();
      const ports = await freePorts();
      const blocker = net.createServer();
      // The API listens on every address, the others on loopback: a blocker on loopback takes either.
      await new Promise<void>((resolve) => blocker.listen(ports[which], '127.0.0.1', resolve));
      try {
        const service = spawnService(dataDir, ports);
        const code = await exitWithin(service, 60_000).then((e) => (e === 'hung' ? e : e.code));
        expect(code).not.toBe(0);
        expect(code).not.toBe('hung');
        expect(service.out()).toBe('');
        expect(service.err()).toMatch(
          new RegExp(`^Startup failed: Port ${ports[which]} \\(${variable}\\) is already in use`),
        );
        // No database was made, so no bootstrap key either; nothing was written.
        expect(existsSync(path.join(dataDir, 'postgres'))).toBe(false);
        expect(readdirSync(dataDir)).toEqual([]);
        expect(await noneLeft([service.child.pid!], dataDir)).toEqual([]);
      } finally {
        await new Promise((r) => blocker.close(r));
      }
    });
  }

  it('names every taken port in one message, a line each with its setting, instead of one per attempt', async () => {
    const dataDir = await freshDataDir();
    const ports = await freePorts();
    const ui = await freePort();
    const blockers = [ports.api, ports.postgres, ports.temporal, ui].map(() => net.createServer());
    await Promise.all(
      [ports.api, ports.postgres, ports.temporal, ui].map(
        (port, i) => new Promise<void>((resolve) => blockers[i]!.listen(port, '127.0.0.1', resolve)),
      ),
    );
    try {
      const service = spawnService(dataDir, ports, { TEMPORAL_UI_PORT: String(ui) });
      const code = await exitWithin(service, 60_000).then((e) => (e === 'hung' ? e : e.code));
      expect(code).toBe(1);
      expect(service.out()).toBe('');
      const taken = (port: number, variable: string, alternative = '') =>
        `  Port ${port} (${variable}) is already in use. Stop what uses it, or set ${variable} to a free port${alternative}.`;
      expect(service.err()).toBe(
        [
          'Startup failed: 4 ports cannot be used:',
          taken(ports.api, 'PORT'),
          taken(ports.postgres, 'EMBEDDED_POSTGRES_PORT', ', or DATABASE_URL to a Postgres of your own'),
          taken(ports.temporal, 'TEMPORAL_DEV_SERVER_PORT', ', or TEMPORAL_ADDRESS to a running Temporal'),
          taken(ui, 'TEMPORAL_UI_PORT', ', or 0 for no Web UI'),
          '',
        ].join('\n'),
      );
      expect(readdirSync(dataDir)).toEqual([]);
      expect(await noneLeft([service.child.pid!], dataDir)).toEqual([]);
    } finally {
      await Promise.all(blockers.map((b) => new Promise((r) => b.close(r))));
    }
  });

  it('leaves no data folder of its own making behind when a taken port stops its first start', async () => {
    const parent = await freshDataDir();
    // Two levels the start makes (DATA_DIR and its parent), below a folder that was there before.
    const dataDir = path.join(parent, 'made', 'data');
    const ports = await freePorts();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(ports.api, '127.0.0.1', resolve));
    try {
      const service = spawnService(dataDir, ports);
      const code = await exitWithin(service, 60_000).then((e) => (e === 'hung' ? e : e.code));
      expect(code).toBe(1);
      expect(service.err()).toMatch(new RegExp(`^Startup failed: Port ${ports.api} \\(PORT\\) is already in use`));
      expect(existsSync(path.join(parent, 'made'))).toBe(false);
      // The folder that was there before stays, as an existing DATA_DIR does (the tests above).
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });

  it('stops what it started when a later step fails (here the Temporal dev server), exit 1, nothing left', async () => {
    const dataDir = await freshDataDir();
    const service = spawnService(dataDir, await freePorts(), {
      TEMPORAL_CLI_PATH: path.join(dataDir, 'no-such-temporal'),
    });
    const code = await exitWithin(service, 90_000).then((e) => (e === 'hung' ? e : e.code));
    expect(code).toBe(1);
    expect(service.err()).toContain('Startup failed: The Temporal dev server did not start');
    // Postgres had started (and made its folder): it was stopped, in order.
    expect(existsSync(path.join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    expect(service.out()).toContain('"msg":"stopped"');
    expect(await noneLeft([service.child.pid!], dataDir)).toEqual([]);
  }, 120_000);

  it('stops in order with exit 1 when its Temporal dev server dies under it, leaving nothing behind', async () => {
    const dataDir = await freshDataDir();
    const ports = await freePorts();
    const service = spawnService(dataDir, ports);
    await waitHealthy(service, ports.api);
    const pids = processTree(service.child.pid!);
    const temporal = pids.find((pid) => processTable().get(pid)?.cmdline.includes(`--port ${ports.temporal}`));
    expect(temporal).toBeDefined();
    process.kill(temporal!, 'SIGKILL');
    const code = await exitWithin(service, 60_000).then((e) => (e === 'hung' ? e : e.code));
    expect(code).toBe(1);
    expect(service.out()).toContain('Temporal dev server exited');
    expect(service.out()).toContain('"msg":"stopped"');
    expect(await noneLeft(pids, dataDir)).toEqual([]);
  }, 180_000);

  it.runIf(isRoot)(
    'as root, says what to do when the postgres user cannot reach DATA_DIR',
    async () => {
      const closed = await freshDataDir(); // 0700, root's
      const dataDir = path.join(closed, 'data');
      const service = spawnService(dataDir, await freePorts());
      expect((await service.exited).code).toBe(1);
      expect(service.err()).toContain(`cannot enter ${closed} (mode 700). Set DATA_DIR to a folder outside it`);
      expect(await noneLeft([service.child.pid!], dataDir)).toEqual([]);
    },
    60_000,
  );

  it.runIf(isRoot)(
    'as root, prepares a private mktemp -d DATA_DIR for the postgres user',
    async () => {
      const dataDir = await freshDataDir();
      expect((await stat(dataDir)).uid).toBe(0);
      expect(mode(dataDir)).toBe('700');
      const ports = await freePorts();
      const service = spawnService(dataDir, ports);
      await waitHealthy(service, ports.api);
      const pids = processTree(service.child.pid!);
      const postmaster = [...processTable()].find(([, p]) => p.cmdline.includes(path.join(dataDir, 'postgres')));
      expect(postmaster).toBeDefined();
      // Postgres runs as the postgres user, in its own 0700 folder; DATA_DIR only lets it through.
      expect(statSync(`/proc/${postmaster![0]}`).uid).not.toBe(0);
      expect(statSync(path.join(dataDir, 'postgres')).uid).toBe(statSync(`/proc/${postmaster![0]}`).uid);
      expect(mode(dataDir)).toBe('701');
      service.child.kill('SIGTERM');
      expect((await service.exited).code).toBe(0);
      expect(await noneLeft(pids, dataDir)).toEqual([]);
    },
    180_000,
  );
});
