import type { ConnectionOptions } from 'node:tls';
import { assertKeyMatches, readCertificates, readPrivateKey } from '../vocabulary/pem.js';

/**
 * How every connection the service opens reaches Postgres: DATABASE_URL with its TLS parameters read the way
 * libpq (psql, every other Postgres client) reads them. node-postgres 8 does not: it treats `require` and
 * `verify-ca` as `verify-full` (a `require` URL that works with psql fails here on a self-signed server)
 * unless `uselibpqcompat=true`, and warns on each. So the TLS parameters are taken out of the URL and turned
 * into Node's TLS options here, once, the same for the pools, the plan status listener and the migrations.
 *
 * - `sslmode=disable` (or no sslmode and no other TLS parameter): not encrypted.
 * - `require`: encrypted, the server's certificate not checked; with `sslrootcert`, as `verify-ca` (libpq).
 * - `verify-ca`: encrypted, the certificate's chain checked against `sslrootcert`.
 * - `verify-full`: also the host name of the URL against the certificate's names.
 * - `sslrootcert=system`: the CAs Node trusts (libpq 16's meaning; only with verify-full, as there).
 * - `sslcert` + `sslkey` (+ `sslpassword`): a client certificate.
 *
 * `prefer` and `allow` (libpq falls back between plain and TLS per connection) are refused: node-postgres
 * cannot fall back, and guessing either way is worse than saying so.
 */
export interface PostgresConnection {
  /** The URL without its TLS parameters (node-postgres would read them its own way). */
  connectionString: string;
  ssl: false | ConnectionOptions;
  sslnegotiation?: 'postgres' | 'direct';
  /** For messages: `host:port/database (sslmode=…)`, never the user's password. */
  describe: string;
  sslmode: string;
  /** The CA file, for a failed verification's message. */
  sslrootcert: string | undefined;
}

const TLS_PARAMS = [
  'sslmode',
  'sslrootcert',
  'sslcert',
  'sslkey',
  'sslpassword',
  'ssl',
  'uselibpqcompat',
  'sslnegotiation',
];
const MODES = ['disable', 'require', 'verify-ca', 'verify-full', 'no-verify'];

/** Reads `url`'s TLS parameters (and their files); throws a sentence naming `setting` when they are wrong. */
export function postgresConnection(url: string, setting = 'DATABASE_URL'): PostgresConnection {
  const q = url.indexOf('?');
  const params = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  const tls = Object.fromEntries(TLS_PARAMS.map((k) => [k, params.get(k) ?? undefined] as const));
  for (const k of TLS_PARAMS) params.delete(k);
  const rest = params.toString();
  const connectionString = (q < 0 ? url : url.slice(0, q)) + (rest ? `?${rest}` : '');
  const where = describeServer(connectionString);

  const fail = (problem: string) => new Error(`${setting}: ${problem}`);
  const given = ['sslrootcert', 'sslcert', 'sslkey', 'ssl'].filter((k) => tls[k] !== undefined);
  const sslmode = tls.sslmode ?? (given.length ? undefined : 'disable');
  if (sslmode === undefined)
    throw fail(
      `${given.join(' and ')} without sslmode: add sslmode=verify-full (or verify-ca, or require to encrypt without checking the server)`,
    );
  if (sslmode === 'prefer' || sslmode === 'allow')
    throw fail(
      `sslmode=${sslmode} is not supported (libpq falls back between TLS and plain connections; this service does not): use sslmode=require, verify-ca or verify-full to encrypt, or sslmode=disable`,
    );
  if (!MODES.includes(sslmode)) throw fail(`sslmode=${sslmode} is not one of disable, require, verify-ca, verify-full`);
  const negotiation = tls.sslnegotiation;
  if (negotiation !== undefined && negotiation !== 'postgres' && negotiation !== 'direct')
    throw fail(`sslnegotiation=${negotiation} is not one of postgres, direct`);
  const base = { connectionString, describe: `${where} (sslmode=${sslmode})`, sslmode, sslrootcert: tls.sslrootcert };
  if (sslmode === 'disable') {
    if (negotiation === 'direct') throw fail('sslnegotiation=direct needs TLS, but sslmode is disable');
    return { ...base, ssl: false };
  }

  const ssl: ConnectionOptions = {};
  const rootcert = tls.sslrootcert;
  if (rootcert === 'system') {
    if (sslmode !== 'verify-full')
      throw fail(
        `sslrootcert=system checks the server against the system's CAs and needs sslmode=verify-full, not ${sslmode}`,
      );
  } else if (rootcert !== undefined) {
    ssl.ca = readCertificates(`${setting} (sslrootcert)`, rootcert);
  } else if (sslmode === 'verify-ca' || sslmode === 'verify-full') {
    throw fail(
      `sslmode=${sslmode} needs sslrootcert=<the CA file that signed the server's certificate> (or sslrootcert=system for the CAs this machine trusts)`,
    );
  }
  if (sslmode === 'no-verify' || (sslmode === 'require' && rootcert === undefined)) {
    // Encrypted against eavesdropping, but anyone on the way could present a certificate.
    ssl.rejectUnauthorized = false;
  } else if (sslmode === 'require' || sslmode === 'verify-ca') {
    // The chain is checked (rejectUnauthorized stays true); the name the URL reached the server by is not.
    ssl.checkServerIdentity = () => undefined;
  }
  if ((tls.sslcert === undefined) !== (tls.sslkey === undefined))
    throw fail(
      tls.sslcert ? 'sslcert without sslkey: a client certificate needs its key' : 'sslkey without sslcert: give both',
    );
  if (tls.sslcert !== undefined && tls.sslkey !== undefined) {
    const cert = readCertificates(`${setting} (sslcert)`, tls.sslcert);
    const key = readPrivateKey(`${setting} (sslkey)`, tls.sslkey, tls.sslpassword);
    assertKeyMatches(
      { setting: `${setting} (sslcert)`, file: tls.sslcert, pem: cert },
      {
        setting: `${setting} (sslkey)`,
        file: tls.sslkey,
        pem: key,
        ...(tls.sslpassword ? { passphrase: tls.sslpassword } : {}),
      },
    );
    ssl.cert = cert;
    ssl.key = key;
    if (tls.sslpassword !== undefined) ssl.passphrase = tls.sslpassword;
  }
  return { ...base, ssl, ...(negotiation ? { sslnegotiation: negotiation as 'postgres' | 'direct' } : {}) };
}

/** `host:port/database` of a URL, without user or password; "the server" when it cannot be read. */
function describeServer(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'the server';
  }
}

/**
 * A failure to connect, in a sentence naming DATABASE_URL when it is about TLS (a certificate that does not
 * verify, a server without TLS, a server that refuses plain connections), with the driver's error as its
 * cause (src/main.ts prints it under the sentence); other failures as they are.
 */
export function explainConnectFailure(err: unknown, conn: PostgresConnection, setting = 'DATABASE_URL'): unknown {
  if (!(err instanceof Error)) return err;
  const code = (err as NodeJS.ErrnoException).code ?? '';
  const reached = `the Postgres server at ${conn.describe}`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return new Error(
      `${setting}: ${reached} presented a certificate for another host name; connect by a name the certificate lists, or use sslmode=verify-ca to check only its chain`,
      { cause: err },
    );
  if (/CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|CA_/.test(code))
    return new Error(
      `${setting}: the certificate of ${reached} could not be verified${conn.sslrootcert ? ` against sslrootcert ${conn.sslrootcert}` : ''}; check that sslrootcert is the CA that signed the server's certificate`,
      { cause: err },
    );
  if (/does not support SSL/i.test(err.message))
    return new Error(`${setting}: ${reached} does not offer TLS; use sslmode=disable, or turn ssl on in the server`, {
      cause: err,
    });
  if (code === '28000' && /no encryption/i.test(err.message))
    return new Error(
      `${setting}: ${reached} refuses unencrypted connections; add sslmode=verify-full&sslrootcert=<CA file> (or sslmode=require)`,
      { cause: err },
    );
  if (/^ERR_SSL|^ERR_TLS/.test(code) || /ssl|tls/i.test(code))
    return new Error(`${setting}: the TLS handshake with ${reached} failed`, { cause: err });
  return err;
}
