import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * Certificate and key files named by settings (TEMPORAL_TLS_CA, DATABASE_URL's sslrootcert, …), read and
 * checked at start: a missing file, a file that is not PEM, or a key that is not the certificate's stops the
 * start with one sentence naming the setting and the file, instead of a TLS handshake failing later with a
 * message that names neither. The messages carry no file content (a key is a secret).
 */

/** Reads `file` for `setting`; throws naming both when it cannot. */
function readFor(setting: string, file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EACCES'
          ? 'cannot be read (permission denied)'
          : code === 'EISDIR'
            ? 'is a folder'
            : `cannot be read (${code ?? (err as Error).message})`;
    throw new Error(`${setting}: the ${what} file ${file} ${why}`);
  }
}

/** One or more PEM certificates (a CA bundle, or a certificate with its chain). */
export function readCertificates(setting: string, file: string): Buffer {
  const pem = readFor(setting, file, 'certificate');
  const blocks = pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g);
  if (!blocks) throw new Error(`${setting}: ${file} is not a PEM certificate (no "-----BEGIN CERTIFICATE-----" block)`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw new Error(`${setting}: ${file} holds a certificate that cannot be parsed`);
    }
  }
  return pem;
}

/** An unencrypted PEM private key (or one `passphrase` opens). */
export function readPrivateKey(setting: string, file: string, passphrase?: string): Buffer {
  const pem = readFor(setting, file, 'private key');
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem.toString('latin1')))
    throw new Error(`${setting}: ${file} is not a PEM private key (no "-----BEGIN … PRIVATE KEY-----" block)`);
  privateKey(setting, file, pem, passphrase);
  return pem;
}

function privateKey(setting: string, file: string, pem: Buffer, passphrase?: string): KeyObject {
  try {
    return createPrivateKey(passphrase === undefined ? pem : { key: pem, passphrase });
  } catch (err) {
    const encrypted = /passphrase|decrypt|bad decrypt/i.test((err as Error).message);
    throw new Error(
      encrypted
        ? `${setting}: the private key in ${file} is encrypted and no passphrase opens it`
        : `${setting}: ${file} holds a private key that cannot be parsed`,
    );
  }
}

/** Throws naming both settings when the key in `keyPem` is not the one of the first certificate of `certPem`. */
export function assertKeyMatches(
  cert: { setting: string; file: string; pem: Buffer },
  key: { setting: string; file: string; pem: Buffer; passphrase?: string },
): void {
  const first = new X509Certificate(cert.pem);
  if (!first.checkPrivateKey(privateKey(key.setting, key.file, key.pem, key.passphrase))) {
    throw new Error(
      `${key.setting}: the private key in ${key.file} does not belong to the certificate in ${cert.file} (${cert.setting})`,
    );
  }
}
