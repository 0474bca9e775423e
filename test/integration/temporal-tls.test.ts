import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { createCa } from '../support/certificates.js';
import { createHarness, type Harness } from '../support/harness.js';
import { runCompletedPlan } from '../support/plans.js';
import { exitWithin, spawnKept } from '../support/processes.js';
import { findTemporalServerTools, TemporalServer } from '../support/temporal-server.js';

/**
 * The service against the real Temporal server (not the dev server) serving TLS on its frontend from a
 * CA of the test's own, requiring client certificates (mTLS): with TEMPORAL_TLS_CA, TEMPORAL_TLS_CERT and
 * TEMPORAL_TLS_KEY it runs a plan (its workflow on the worker's native connection, its start and the
 * search attributes on the client's); a wrong CA, a missing client certificate, no TLS and a missing file
 * stop the start with one sentence naming the setting; the server survives a kill -9. The server needs its
 * binary (src/temporal/server-binary.ts): built with Go when missing; without Go the file is skipped, saying
 * why, except in CI, where it fails.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const found = await findTemporalServerTools(loadConfig().cacheDir);
if ('missing' in found) {
  if (process.env.CI) throw new Error(`CI must run the Temporal TLS test: ${found.missing}`);
  process.stdout.write(`temporal-tls.test.ts skipped: ${found.missing}\n`);
}

const run = randomBytes(4).toString('hex');
let dir: string;
let server: TemporalServer;
let wrongCa: string;
let databaseUrl: string;
const databases = { temporal: `temporal_${run}`, visibility: `temporal_visibility_${run}` };

describe.skipIf('missing' in found)('Temporal over TLS (the real server, mTLS on its frontend)', () => {
  beforeAll(async () => {
    if ('missing' in found) return;
    dir = await mkdtemp(path.join(os.tmpdir(), 'wfa-temporal-tls-'));
    // The server keeps its state in the suite's Postgres, in two databases of its own.
    const admin = new URL(inject('pgAdminUrl'));
    server = await TemporalServer.create({
      ...found,
      dir: path.join(dir, 'temporal'),
      postgres: {
        host: admin.hostname,
        port: Number(admin.port || 5432),
        user: decodeURIComponent(admin.username),
        password: decodeURIComponent(admin.password),
      },
      databases,
      tls: { mutual: true },
    });
    await server.start();
    wrongCa = (await createCa(path.join(dir, 'other'), 'wrong-ca')).cert;
    const database = `wfa_temporal_tls_${run}`;
    await ensureDatabase(inject('pgAdminUrl'), database);
    const url = new URL(inject('pgAdminUrl'));
    url.pathname = `/${database}`;
    databaseUrl = url.toString();
  });

  afterAll(async () => {
    await server?.stop();
    const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await admin.connect();
    for (const db of [...Object.values(databases), `wfa_temporal_tls_${run}`])
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(db)} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The Temporal settings a service gets from this environment (on top of the server's address). */
  const temporalSettings = (env: NodeJS.ProcessEnv) =>
    loadConfig({ TEMPORAL_ADDRESS: server.address, ...env }).temporal;

  it('with TEMPORAL_TLS_CA, TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY the service runs a plan to Completed', async () => {
    // An API key too (this server has no authorizer and ignores it): sent with every request, logged nowhere.
    const apiKey = `temporal-api-key-${run}-never-logged`;
    let h: Harness | undefined;
    try {
      h = await createHarness({
        temporal: temporalSettings({
          TEMPORAL_TLS_CA: server.certs!.ca,
          TEMPORAL_TLS_CERT: server.certs!.client.cert,
          TEMPORAL_TLS_KEY: server.certs!.client.key,
          TEMPORAL_API_KEY: apiKey,
        }),
      });
      await runCompletedPlan(h, { planId: `tls-${run}`, definitionId: 'tls-orders', count: 20, value: 7 });
      const { rows } = await h.pool.query<{ n: number }>(
        `SELECT count(*) AS n FROM workflow_instances WHERE (variables->>'amount')::int = 7`,
      );
      expect(rows[0]!.n).toBe(20);
      // The plan's workflow ran on this server, with its search attributes (registered over the same TLS).
      const described = await server.cli(['workflow', 'describe', '--workflow-id', `alteration-plan-tls-${run}`]);
      expect(described).toMatch(/Status\s+COMPLETED/);
      const logged = JSON.stringify(h.logs);
      expect(logged).not.toContain(apiKey);
      expect(logged).not.toMatch(/PRIVATE KEY/);
    } finally {
      await h?.close();
    }
  });

  it('without a client certificate, or without TLS, the start fails saying which setting is missing', async () => {
    await expect(createHarness({ temporal: temporalSettings({ TEMPORAL_TLS_CA: server.certs!.ca }) })).rejects.toThrow(
      // The server's alert races its close: the sentence is sure when the alert came first.
      /^The Temporal server at 127\.0\.0\.1:\d+ \(TEMPORAL_ADDRESS\) (requires|closed the TLS connection, as a server does that requires) a client certificate \(mTLS\): set TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY$/,
    );
    await expect(createHarness({ temporal: temporalSettings({}) })).rejects.toThrow(
      /^The Temporal server at 127\.0\.0\.1:\d+ \(TEMPORAL_ADDRESS\) closed the connection: if it serves TLS, set TEMPORAL_TLS=true \(and TEMPORAL_TLS_CA for a private CA\)$/,
    );
  });

  it('a wrong CA: npm start exits 1 with one sentence naming TEMPORAL_TLS_CA; a missing file names its variable', async () => {
    const start = (env: NodeJS.ProcessEnv) =>
      spawnKept(process.execPath, ['--import', 'tsx', 'src/main.ts', '--worker'], {
        cwd: ROOT,
        env: {
          ...process.env,
          DATABASE_URL: databaseUrl,
          TEMPORAL_ADDRESS: server.address,
          TEMPORAL_TLS_CERT: server.certs!.client.cert,
          TEMPORAL_TLS_KEY: server.certs!.client.key,
          DATA_DIR: path.join(dir, 'data'),
          LOG_LEVEL: 'warn',
          ...env,
        },
      });
    const missing = path.join(dir, 'no-such-ca.pem');
    const [wrong, gone] = [start({ TEMPORAL_TLS_CA: wrongCa }), start({ TEMPORAL_TLS_CA: missing })];
    for (const p of [wrong, gone]) {
      const exit = await exitWithin(p, 45_000);
      if (exit === 'hung') p.child.kill('SIGKILL');
      expect(exit, p.tail()).toEqual({ code: 1, signal: null });
      // The private key's content appears nowhere in what the process wrote.
      expect(p.out() + p.err()).not.toMatch(/PRIVATE KEY/);
    }
    expect(wrong.err(), wrong.tail()).toMatch(
      new RegExp(
        `^Startup failed: The certificate of the Temporal server at 127\\.0\\.0\\.1:\\d+ \\(TEMPORAL_ADDRESS\\) does not verify against TEMPORAL_TLS_CA \\(${wrongCa}\\): set TEMPORAL_TLS_CA to the CA that signed the server's certificate\\n  cause: .*UnknownIssuer`,
        'm',
      ),
    );
    expect(gone.err().trim()).toBe(
      `Startup failed: Invalid configuration in the environment: TEMPORAL_TLS_CA: the certificate file ${missing} does not exist`,
    );
  });

  it('the server killed with kill -9 starts again on its databases, the plan it ran still there', async () => {
    const pid = server.pid!;
    await server.kill9();
    expect(() => process.kill(pid, 0)).toThrow();
    await server.start();
    const described = await server.cli(['workflow', 'describe', '--workflow-id', `alteration-plan-tls-${run}`]);
    expect(described).toMatch(/Status\s+COMPLETED/);
  });
});
