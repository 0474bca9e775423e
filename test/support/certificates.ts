import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const openssl = (args: string[]) => promisify(execFile)('openssl', args);

/** A PEM certificate and its unencrypted private key, as files. */
export interface CertFiles {
  cert: string;
  key: string;
}

/**
 * A self-signed certificate authority of a test, made with openssl in `dir`: `<name>.pem` and `<name>.key`.
 * Two of them are how a test shows a wrong CA (a chain that does not lead to the one trusted).
 */
export async function createCa(dir: string, name = 'ca'): Promise<CertFiles> {
  await mkdir(dir, { recursive: true });
  const files = { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) };
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-sha256',
    '-days',
    '30',
    '-subj',
    `/CN=wf-alter test ${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout',
    files.key,
    '-out',
    files.cert,
  ]);
  return files;
}

/**
 * A leaf certificate signed by `ca`: for a server, the names clients reach it by go in the subject
 * alternative names (`DNS:localhost`, `IP:127.0.0.1`: verify-full and gRPC check those, not the CN);
 * serverAuth and clientAuth both, so the same certificate serves a server and its own internal clients.
 */
export async function issueCert(
  ca: CertFiles,
  dir: string,
  name: string,
  opts: { commonName: string; altNames?: string[] },
): Promise<CertFiles> {
  const files = { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) };
  const csr = path.join(dir, `${name}.csr`);
  const ext = path.join(dir, `${name}.ext`);
  await openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-sha256',
    '-subj',
    `/CN=${opts.commonName}`,
    '-keyout',
    files.key,
    '-out',
    csr,
  ]);
  await writeFile(
    ext,
    [
      'basicConstraints=CA:FALSE',
      'keyUsage=digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth,clientAuth',
      ...(opts.altNames?.length ? [`subjectAltName=${opts.altNames.join(',')}`] : []),
    ].join('\n') + '\n',
  );
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-CAcreateserial',
    '-days',
    '30',
    '-sha256',
    '-extfile',
    ext,
    '-out',
    files.cert,
  ]);
  return files;
}
