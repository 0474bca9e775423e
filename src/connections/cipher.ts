import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Encryption at rest of connection configurations: AES-256-GCM (authenticated), with a key derived from
 * CONNECTIONS_ENCRYPTION_KEY by HKDF-SHA256. The row's id and tenant are bound in as associated data, so
 * a ciphertext moved to another row does not decrypt. A wrong key fails authentication: it never yields
 * garbage.
 */
export interface ConfigCipher {
  readonly enabled: boolean;
  encrypt(plaintext: string, associatedData: string): Buffer;
  decrypt(blob: Buffer, associatedData: string): string;
  /** Encrypted with the previous key during a rotation (CONNECTIONS_ENCRYPTION_KEY_PREVIOUS): to encrypt again. */
  stale(blob: Buffer, associatedData: string): boolean;
}

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class DecryptionError extends Error {}

/**
 * The cipher of CONNECTIONS_ENCRYPTION_KEY. With `previous` (CONNECTIONS_ENCRYPTION_KEY_PREVIOUS, during a key
 * rotation) it also decrypts what the previous key encrypted, and says so (`stale`), so that the start can
 * encrypt those rows again under the current key (`reencryptConnections`); it always encrypts with the current.
 */
export function createConfigCipher(secret: string | undefined, previous?: string): ConfigCipher {
  if (!secret) {
    if (previous)
      throw new DecryptionError('CONNECTIONS_ENCRYPTION_KEY_PREVIOUS is set without CONNECTIONS_ENCRYPTION_KEY');
    return {
      enabled: false,
      encrypt() {
        throw new Error('Connection encryption is not configured');
      },
      decrypt() {
        throw new DecryptionError('A connection configuration is encrypted but CONNECTIONS_ENCRYPTION_KEY is not set');
      },
      stale: () => false,
    };
  }
  const key = deriveKey(secret);
  const old = previous ? deriveKey(previous) : undefined;
  const open = (k: Buffer, blob: Buffer, associatedData: string): string | undefined => {
    const iv = blob.subarray(1, 1 + IV_BYTES);
    const tag = blob.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', k, iv);
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(blob.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      return undefined;
    }
  };
  const check = (blob: Buffer) => {
    if (blob.length < 1 + IV_BYTES + TAG_BYTES || blob[0] !== VERSION)
      throw new DecryptionError('Not an encrypted connection configuration');
  };
  return {
    enabled: true,
    encrypt(plaintext, associatedData) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(associatedData, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
    },
    decrypt(blob, associatedData) {
      check(blob);
      const plain = open(key, blob, associatedData) ?? (old ? open(old, blob, associatedData) : undefined);
      if (plain !== undefined) return plain;
      throw new DecryptionError(
        old
          ? 'Neither CONNECTIONS_ENCRYPTION_KEY nor CONNECTIONS_ENCRYPTION_KEY_PREVIOUS decrypts the stored connection configurations (wrong keys?)'
          : 'CONNECTIONS_ENCRYPTION_KEY does not decrypt the stored connection configurations (wrong key?)',
      );
    },
    stale(blob, associatedData) {
      check(blob);
      return (
        old !== undefined &&
        open(key, blob, associatedData) === undefined &&
        open(old, blob, associatedData) !== undefined
      );
    },
  };
}

const deriveKey = (secret: string) =>
  Buffer.from(hkdfSync('sha256', secret, 'workflow-alterations', 'connection-configurations v1', 32));
