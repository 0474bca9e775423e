import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { postgresConnection } from '../../src/db/postgres-connection.js';
import { connectionOptions } from '../../src/temporal/connect.js';
import { type CertFiles, createCa, issueCert } from '../support/certificates.js';

let dir: string;
let ca: CertFiles;
let client: CertFiles;
let other: CertFiles;
let notPem: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'wfa-tls-settings-'));
  ca = await createCa(dir);
  client = await issueCert(ca, dir, 'client', { commonName: 'client' });
  other = await issueCert(ca, dir, 'other', { commonName: 'other' });
  notPem = path.join(dir, 'not-pem.txt');
  await writeFile(notPem, 'this is not a certificate\n');
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const ADDRESS = { TEMPORAL_ADDRESS: 'temporal.internal:7233' };
/** The ConfigError's message of loadConfig(env), or undefined when it loads. */
const problem = (env: NodeJS.ProcessEnv) => {
  try {
    loadConfig(env);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
};

describe('Temporal TLS settings', () => {
  it('are off unless one is set; TEMPORAL_TLS=true alone is TLS against the CAs the machine trusts', () => {
    expect(loadConfig(ADDRESS).temporal.tls).toBeUndefined();
    const config = loadConfig({ ...ADDRESS, TEMPORAL_TLS: 'true' });
    expect(config.temporal.tls).toEqual({ ca: undefined, client: undefined, serverName: undefined });
    expect(connectionOptions({ ...config.temporal, address: 'temporal.internal:7233' })).toEqual({
      address: 'temporal.internal:7233',
      tls: {},
    });
  });

  it('read a CA, a client certificate and its key (mTLS) and a server name into the SDK options', () => {
    const { temporal } = loadConfig({
      ...ADDRESS,
      TEMPORAL_TLS_CA: ca.cert,
      TEMPORAL_TLS_CERT: client.cert,
      TEMPORAL_TLS_KEY: client.key,
      TEMPORAL_TLS_SERVER_NAME: 'temporal.example',
    });
    const options = connectionOptions({ ...temporal, address: 'temporal.internal:7233' });
    expect(options.tls?.serverRootCACertificate?.toString()).toMatch(/BEGIN CERTIFICATE/);
    expect(options.tls?.clientCertPair?.key.toString()).toMatch(/PRIVATE KEY/);
    expect(options.tls?.serverNameOverride).toBe('temporal.example');
    expect(options).not.toHaveProperty('apiKey');
  });

  it('TEMPORAL_API_KEY (Temporal Cloud) turns TLS on and is sent as the SDK apiKey', () => {
    const { temporal } = loadConfig({ TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233', TEMPORAL_API_KEY: 'secret-key' });
    expect(connectionOptions({ ...temporal, address: 'ns.acct.tmprl.cloud:7233' })).toEqual({
      address: 'ns.acct.tmprl.cloud:7233',
      tls: {},
      apiKey: 'secret-key',
    });
  });

  it('without TEMPORAL_ADDRESS (the embedded dev server) are a configuration error saying so', () => {
    expect(problem({ TEMPORAL_TLS_CA: ca.cert })).toMatch(
      /TEMPORAL_TLS_CA is set but TEMPORAL_ADDRESS is not: .*embedded dev server/,
    );
    expect(problem({ TEMPORAL_TLS: 'true', TEMPORAL_API_KEY: 'secret-key' })).toMatch(
      /TEMPORAL_TLS, TEMPORAL_API_KEY are set but TEMPORAL_ADDRESS is not/,
    );
  });

  it('refuse contradictions and halves: TEMPORAL_TLS=false with TLS files or a key, a certificate without its key', () => {
    const apiKey = problem({ ...ADDRESS, TEMPORAL_TLS: 'false', TEMPORAL_API_KEY: 'secret-key' });
    expect(apiKey).toMatch(/TEMPORAL_TLS is false but TEMPORAL_API_KEY is set.*must not travel unencrypted/);
    expect(apiKey).not.toContain('secret-key');
    expect(problem({ ...ADDRESS, TEMPORAL_TLS: 'false', TEMPORAL_TLS_CA: ca.cert })).toMatch(
      /TEMPORAL_TLS is false but TEMPORAL_TLS_CA is set/,
    );
    expect(problem({ ...ADDRESS, TEMPORAL_TLS: 'yes' })).toMatch(/TEMPORAL_TLS: .*"true"\|"false"/);
    expect(problem({ ...ADDRESS, TEMPORAL_TLS_CERT: client.cert })).toMatch(
      /TEMPORAL_TLS_CERT is set without TEMPORAL_TLS_KEY/,
    );
    expect(problem({ ...ADDRESS, TEMPORAL_TLS_KEY: client.key })).toMatch(
      /TEMPORAL_TLS_KEY is set without TEMPORAL_TLS_CERT/,
    );
  });

  it('name the variable and the file when a file is missing, not PEM, or a key is not the certificate’s', () => {
    const missing = path.join(dir, 'no-such-ca.pem');
    expect(problem({ ...ADDRESS, TEMPORAL_TLS_CA: missing })).toBe(
      `Invalid configuration in the environment: TEMPORAL_TLS_CA: the certificate file ${missing} does not exist`,
    );
    expect(problem({ ...ADDRESS, TEMPORAL_TLS_CA: notPem })).toMatch(
      new RegExp(`TEMPORAL_TLS_CA: ${notPem} is not a PEM certificate`),
    );
    expect(problem({ ...ADDRESS, TEMPORAL_TLS_CA: dir })).toMatch(
      /TEMPORAL_TLS_CA: the certificate file .* is a folder/,
    );
    expect(problem({ ...ADDRESS, TEMPORAL_TLS_CERT: client.cert, TEMPORAL_TLS_KEY: client.cert })).toMatch(
      /TEMPORAL_TLS_KEY: .*client\.pem is not a PEM private key/,
    );
    const mismatch = problem({ ...ADDRESS, TEMPORAL_TLS_CERT: client.cert, TEMPORAL_TLS_KEY: other.key });
    expect(mismatch).toMatch(
      /TEMPORAL_TLS_KEY: the private key in .*other\.key does not belong to the certificate in .*client\.pem \(TEMPORAL_TLS_CERT\)/,
    );
    expect(mismatch).not.toMatch(/BEGIN/);
  });
});

describe("DATABASE_URL's sslmode, as libpq reads it", () => {
  const url = (params: string) => `postgres://app:s3cret@db.internal:5432/wfa?application_name=x&${params}`;

  it('no TLS parameter: plain, the URL as it was', () => {
    const c = postgresConnection('postgres://app:s3cret@db.internal/wfa');
    expect(c.ssl).toBe(false);
    expect(c.connectionString).toBe('postgres://app:s3cret@db.internal/wfa');
  });

  it('require: encrypted and not verified; with sslrootcert, the chain checked (verify-ca), as libpq', () => {
    const require = postgresConnection(url('sslmode=require'));
    expect(require.ssl).toEqual({ rejectUnauthorized: false });
    // The TLS parameters are the service's to read: node-postgres never sees them (it would verify-full).
    expect(require.connectionString).toBe('postgres://app:s3cret@db.internal:5432/wfa?application_name=x');
    const withCa = postgresConnection(url(`sslmode=require&sslrootcert=${ca.cert}`));
    expect(withCa.ssl && withCa.ssl.ca?.toString()).toMatch(/BEGIN CERTIFICATE/);
    expect(withCa.ssl && withCa.ssl.rejectUnauthorized).toBeUndefined();
    expect(withCa.ssl && withCa.ssl.checkServerIdentity?.('other.host', {} as never)).toBeUndefined();
  });

  it('verify-ca checks the chain only; verify-full also the host name (Node’s own check)', () => {
    const verifyCa = postgresConnection(url(`sslmode=verify-ca&sslrootcert=${ca.cert}`));
    expect(verifyCa.ssl && typeof verifyCa.ssl.checkServerIdentity).toBe('function');
    const verifyFull = postgresConnection(url(`sslmode=verify-full&sslrootcert=${ca.cert}`));
    expect(verifyFull.ssl).toMatchObject({ ca: expect.any(Buffer) });
    expect(verifyFull.ssl && verifyFull.ssl.checkServerIdentity).toBeUndefined();
    expect(verifyFull.ssl && verifyFull.ssl.rejectUnauthorized).toBeUndefined();
    const system = postgresConnection(url('sslmode=verify-full&sslrootcert=system'));
    expect(system.ssl).toEqual({});
    const mtls = postgresConnection(
      url(`sslmode=verify-full&sslrootcert=${ca.cert}&sslcert=${client.cert}&sslkey=${client.key}`),
    );
    expect(mtls.ssl && mtls.ssl.key?.toString()).toMatch(/PRIVATE KEY/);
  });

  it('refuses what it cannot honour or what is half there, naming DATABASE_URL and never its password', () => {
    const bad: [string, RegExp][] = [
      ['sslmode=verify-ca', /DATABASE_URL: sslmode=verify-ca needs sslrootcert=/],
      ['sslmode=verify-full', /DATABASE_URL: sslmode=verify-full needs sslrootcert=/],
      ['sslmode=prefer', /DATABASE_URL: sslmode=prefer is not supported/],
      ['sslmode=allow', /DATABASE_URL: sslmode=allow is not supported/],
      ['sslmode=maybe', /DATABASE_URL: sslmode=maybe is not one of disable, require, verify-ca, verify-full/],
      [`sslrootcert=${ca.cert}`, /DATABASE_URL: sslrootcert without sslmode: add sslmode=verify-full/],
      ['sslmode=require&sslrootcert=system', /sslrootcert=system .* needs sslmode=verify-full, not require/],
      [`sslmode=require&sslcert=${client.cert}`, /DATABASE_URL: sslcert without sslkey/],
      [
        `sslmode=verify-full&sslrootcert=${path.join(dir, 'gone.pem')}`,
        /DATABASE_URL \(sslrootcert\): the certificate file .*gone\.pem does not exist/,
      ],
      [
        `sslmode=verify-full&sslrootcert=${notPem}`,
        /DATABASE_URL \(sslrootcert\): .*not-pem\.txt is not a PEM certificate/,
      ],
      [
        `sslmode=require&sslcert=${client.cert}&sslkey=${other.key}`,
        /DATABASE_URL \(sslkey\): the private key in .*other\.key does not belong to the certificate/,
      ],
    ];
    for (const [params, message] of bad) {
      let thrown: Error | undefined;
      try {
        loadConfig({ DATABASE_URL: url(params) });
      } catch (err) {
        thrown = err as Error;
      }
      expect(thrown, params).toBeInstanceOf(ConfigError);
      expect(thrown!.message, params).toMatch(message);
      expect(thrown!.message, params).not.toContain('s3cret');
    }
  });
});
