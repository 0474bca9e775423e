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
}

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class DecryptionError extends Error {}

export function createConfigCipher(secret: string | undefined): ConfigCipher {
  if (!secret) {
    return {
      enabled: false,
      encrypt() {
        throw new Error('Connection encryption is not configured');
      },
      decrypt() {
        throw new DecryptionError('A connection configuration is encrypted but CONNECTIONS_ENCRYPTION_KEY is not set');
      },
    };
  }
  const key = Buffer.from(hkdfSync('sha256', secret, 'workflow-alterations', 'connection-configurations v1', 32));
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
      if (blob.length < 1 + IV_BYTES + TAG_BYTES || blob[0] !== VERSION)
        throw new DecryptionError('Not an encrypted connection configuration');
      const iv = blob.subarray(1, 1 + IV_BYTES);
      const tag = blob.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
      const decipher = createDecipheriv('aes-256-gcm', key, iv);
      decipher.setAAD(Buffer.from(associatedData, 'utf8'));
      decipher.setAuthTag(tag);
      try {
        return Buffer.concat([decipher.update(blob.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
          'utf8',
        );
      } catch {
        throw new DecryptionError(
          'CONNECTIONS_ENCRYPTION_KEY does not decrypt the stored connection configurations (wrong key?)',
        );
      }
    },
  };
}
