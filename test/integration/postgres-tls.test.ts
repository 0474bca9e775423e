import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Config, loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createService, type Service } from '../../src/service/index.js';
import { type CertFiles, createCa, issueCert } from '../support/certificates.js';
import { freePort } from '../support/free-port.js';
import { PostgresServer } from '../support/postgres-server.js';
import { orderApproval } from '../support/workflows.js';

/**
 * The service on a Postgres that serves TLS only (`ssl=on`, plain connections refused by pg_hba), its
 * certificate from a CA of the test's own, issued for `localhost` only: DATABASE_URL's sslmode as libpq
 * means it. verify-full with sslrootcert works by that name and every connection the service opens is
 * encrypted (pg_stat_ssl); verify-ca checks the chain but not the name; require encrypts without a CA
 * (node-postgres alone would verify it and fail); a wrong CA, a wrong name and no sslmode each stop the
 * start with a sentence naming DATABASE_URL, never its password.
 */

const run = randomBytes(4).toString('hex');
const password = `pw-${randomBytes(8).toString('hex')}`;
let dir: string;
let server: PostgresServer;
let ca: CertFiles;
let wrongCa: CertFiles;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'wfa-postgres-tls-'));
  ca = await createCa(path.join(dir, 'certs'));
  wrongCa = await createCa(path.join(dir, 'certs'), 'wrong-ca');
  const cert = await issueCert(ca, path.join(dir, 'certs'), 'server', {
    commonName: 'localhost',
    altNames: ['DNS:localhost'],
  });
  server = await PostgresServer.create({
    dir: path.join(dir, 'postgres'),
    port: await freePort(),
    password,
    tls: { ...cert, only: true },
  });
  await server.start();
  const admin = new pg.Client({
    connectionString: server.url('postgres', {}, 'localhost'),
    ssl: { ca: await readFile(ca.cert) },
  });
  await admin.connect();
  await admin.query('CREATE DATABASE wfa');
  await admin.end();
});

afterAll(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The service as npm start builds it, on DATABASE_URL = `url` and the suite's Temporal. */
async function startService(url: string): Promise<Service> {
  const base = loadConfig({ DATABASE_URL: url });
  const config: Config = {
    ...base,
    dataDir: path.join(dir, 'data'),
    adminApiKey: `wfa_tls_${run}`,
    authSigningKey: `signing key ${run}`,
    temporal: { ...base.temporal, address: inject('temporalAddress'), taskQueue: `pg-tls-${run}`, uiPort: 0 },
  };
  return createService(config, {
    logger: createLogger('silent'),
    runtimeLogger: createLogger('error'),
    listen: false,
    workflowBundlePath: inject('workflowBundlePath'),
    workerOptions: { shutdownGraceTime: '1 second' },
  });
}

/** The start's failure message (a start that succeeds fails the test). */
async function startFailure(url: string): Promise<string> {
  const service = await startService(url).catch((err: unknown) => err as Error);
  if (!(service instanceof Error)) {
    await service.stop();
    throw new Error(`the service started with ${url}`);
  }
  return service.message;
}

describe("DATABASE_URL's sslmode against a Postgres that serves TLS only", () => {
  it('verify-full with sslrootcert: the service works and every connection it opened is encrypted', async () => {
    const service = await startService(
      server.url('wfa', { sslmode: 'verify-full', sslrootcert: ca.cert }, 'localhost'),
    );
    try {
      const headers = { authorization: `ApiKey wfa_tls_${run}`, 'content-type': 'application/json' };
      const published = await service.app!.request('/workflow-definitions', {
        method: 'POST',
        headers,
        body: JSON.stringify(orderApproval('tls-orders')),
      });
      expect(published.status).toBe(201);
      const started = await service.app!.request('/workflow-instances', {
        method: 'POST',
        headers,
        body: JSON.stringify({ definitionId: 'tls-orders' }),
      });
      expect(started.status).toBe(202);
      // Answered with the instance already suspended on its event (its steps ran in the start's transaction).
      const { workflowInstanceId } = (await started.json()) as { workflowInstanceId: string };
      const instance = await service.app!.request(`/workflow-instances/${workflowInstanceId}`, { headers });
      expect(((await instance.json()) as { subStatus: string }).subStatus).toBe('Suspended');
      const { rows } = await service.pool.query<{ application_name: string; ssl: boolean; version: string }>(
        `SELECT a.application_name, s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
          WHERE a.datname = current_database() AND a.backend_type = 'client backend'`,
      );
      const names = new Set(rows.map((r) => r.application_name));
      // The API's pool, the plan status listener and the worker's pools (its relay reads the outbox).
      expect(names).toContain('workflow-alterations-api');
      expect(names).toContain('wfa-plan-status');
      expect(names).toContain('workflow-alterations-worker');
      expect(rows.filter((r) => !r.ssl)).toEqual([]);
      expect(rows.every((r) => /^TLSv1\.[23]$/.test(r.version))).toBe(true);
    } finally {
      await service.stop();
    }
  });

  it('verify-ca checks the chain, not the host name; verify-full by a name the certificate lacks fails naming DATABASE_URL', async () => {
    const service = await startService(server.url('wfa', { sslmode: 'verify-ca', sslrootcert: ca.cert }));
    await service.stop();
    const message = await startFailure(server.url('wfa', { sslmode: 'verify-full', sslrootcert: ca.cert }));
    expect(message).toMatch(
      /^DATABASE_URL: the Postgres server at 127\.0\.0\.1:\d+\/wfa \(sslmode=verify-full\) presented a certificate for another host name; connect by a name the certificate lists, or use sslmode=verify-ca/,
    );
  });

  it('require encrypts without a CA, as libpq (node-postgres alone would verify and refuse it)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    const service = await startService(server.url('wfa', { sslmode: 'require' }));
    try {
      // node-postgres's "SECURITY WARNING: The SSL modes 'prefer', 'require', and 'verify-ca' are treated as
      // aliases for 'verify-full'" is not for this service: it never sees the sslmode.
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => /sslmode|SSL modes/i.test(w))).toEqual([]);
      const { rows } = await service.pool.query<{ ssl: boolean }>(
        'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
      );
      expect(rows).toEqual([{ ssl: true }]);
    } finally {
      process.off('warning', onWarning);
      await service.stop();
    }
  });

  it('a wrong CA, or no sslmode against a server that refuses plain connections, stops the start with a sentence naming DATABASE_URL', async () => {
    const wrong = await startFailure(
      server.url('wfa', { sslmode: 'verify-full', sslrootcert: wrongCa.cert }, 'localhost'),
    );
    expect(wrong).toBe(
      `DATABASE_URL: the certificate of the Postgres server at localhost:${server.port}/wfa (sslmode=verify-full) could not be verified against sslrootcert ${wrongCa.cert}; check that sslrootcert is the CA that signed the server's certificate`,
    );
    const plain = await startFailure(server.url('wfa'));
    expect(plain).toMatch(
      /^DATABASE_URL: the Postgres server at 127\.0\.0\.1:\d+\/wfa \(sslmode=disable\) refuses unencrypted connections; add sslmode=verify-full/,
    );
    for (const m of [wrong, plain]) expect(m).not.toContain(password);
  });
});
