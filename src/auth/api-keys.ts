import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import type { Principal } from './principal.js';
import { tenantOut } from './principal.js';

const KEY_PREFIX = 'wfa_';

/** Keys are 256 random bits, so one fast hash is enough at rest (no dictionary to guess from). */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

export interface CreatedApiKey {
  id: string;
  name: string;
  key: string;
  permissions: string[];
  tenantId: string | null;
}

/** Stores a new key's hash; the key itself is returned once and never stored. */
export async function createApiKey(
  db: Queryable,
  input: { name: string; permissions: string[]; tenantKey: string; isBootstrap?: boolean },
): Promise<CreatedApiKey> {
  const id = newId();
  const key = generateApiKey();
  await db.query(
    'INSERT INTO api_keys (id, tenant_id, name, key_hash, permissions, is_bootstrap) VALUES ($1, $2, $3, $4, $5::text[], $6)',
    [id, input.tenantKey, input.name, hashApiKey(key), input.permissions, input.isBootstrap ?? false],
  );
  return { id, name: input.name, key, permissions: input.permissions, tenantId: tenantOut(input.tenantKey) };
}

/** The principal behind an API key, or undefined for an unknown key. */
export async function findApiKeyPrincipal(db: Queryable, key: string): Promise<Principal | undefined> {
  const { rows } = await db.query<{ id: string; name: string; tenant_id: string; permissions: string[] }>(
    'SELECT id, name, tenant_id, permissions FROM api_keys WHERE key_hash = $1',
    [hashApiKey(key)],
  );
  const r = rows[0];
  if (!r) return undefined;
  return { kind: 'api-key', id: r.id, name: r.name, tenantId: tenantOut(r.tenant_id), permissions: r.permissions };
}

/** Constant-time comparison of a presented key with the ADMIN_API_KEY bootstrap key. */
export function matchesAdminKey(presented: string, adminKeyHash: string | undefined): boolean {
  if (!adminKeyHash) return false;
  const a = Buffer.from(hashApiKey(presented), 'hex');
  const b = Buffer.from(adminKeyHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

export const ADMIN_PRINCIPAL_ID = 'admin-api-key';

/**
 * With ADMIN_API_KEY unset, the first start generates an admin key (grant `*`, default tenant), stores
 * only its hash and returns the key so the caller prints it once. Later starts find it and return
 * undefined. A unique index makes two processes starting at once create one key, not two.
 */
export async function ensureBootstrapApiKey(db: Queryable): Promise<string | undefined> {
  const { rowCount } = await db.query('SELECT 1 FROM api_keys WHERE is_bootstrap');
  if (rowCount) return undefined;
  try {
    const created = await createApiKey(db, { name: 'bootstrap admin', permissions: ['*'], tenantKey: '', isBootstrap: true });
    return created.key;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') return undefined;
    throw err;
  }
}
