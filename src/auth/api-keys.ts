import { noteAudit } from '../audit/scope.js';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import type { Principal } from './principal.js';
import { CREATOR_SQL, type CreatorView } from './users.js';
import { tenantOut } from './principal.js';
import { isUniqueViolation } from '../db/errors.js';

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
  expiresAt: string | null;
}

/** A stored key as listed: never the key, never its hash. */
export interface ApiKeyView {
  id: string;
  name: string;
  permissions: string[];
  tenantId: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  createdBy: CreatorView | null;
}

/** Stores a new key's hash; the key itself is returned once and never stored. */
export async function createApiKey(
  db: Queryable,
  input: {
    name: string;
    permissions: string[];
    tenantKey: string;
    isBootstrap?: boolean;
    expiresAt?: Date | null;
    /** Who made it: four eyes refuse it the plans of its creator's line (src/alterations/governance.ts `fourEyesRefusal`). */
    createdBy?: { kind: 'user' | 'apiKey'; id: string } | undefined;
  },
): Promise<CreatedApiKey> {
  const id = newId();
  noteAudit({ targetId: id });
  const key = generateApiKey();
  await db.query(
    'INSERT INTO api_keys (id, tenant_id, name, key_hash, permissions, is_bootstrap, expires_at, created_by) VALUES ($1, $2, $3, $4, $5::text[], $6, $7, $8::jsonb)',
    [
      id,
      input.tenantKey,
      input.name,
      hashApiKey(key),
      input.permissions,
      input.isBootstrap ?? false,
      input.expiresAt ?? null,
      input.createdBy ? JSON.stringify(input.createdBy) : null,
    ],
  );
  return {
    id,
    name: input.name,
    key,
    permissions: input.permissions,
    tenantId: tenantOut(input.tenantKey),
    expiresAt: input.expiresAt ? input.expiresAt.toISOString() : null,
  };
}

/** The tenant's keys, oldest first; never a key or a hash. */
export async function listApiKeys(
  db: Queryable,
  tenantKey: string,
): Promise<{ items: ApiKeyView[]; totalCount: number }> {
  const { rows } = await db.query<{
    id: string;
    name: string;
    permissions: string[];
    tenant_id: string;
    created_at: Date;
    last_used_at: Date | null;
    expires_at: Date | null;
    created_by: CreatorView | null;
  }>(
    `SELECT k.id, k.name, k.permissions, k.tenant_id, k.created_at, k.last_used_at, k.expires_at, ${CREATOR_SQL('k')} AS created_by
       FROM api_keys k WHERE k.tenant_id = $1 ORDER BY k.created_at, k.id`,
    [tenantKey],
  );
  const items = rows.map((r) => ({
    id: r.id,
    name: r.name,
    permissions: r.permissions,
    tenantId: tenantOut(r.tenant_id),
    createdAt: r.created_at.toISOString(),
    lastUsedAt: r.last_used_at?.toISOString() ?? null,
    expiresAt: r.expires_at?.toISOString() ?? null,
    createdBy: r.created_by,
  }));
  return { items, totalCount: items.length };
}

/**
 * Revokes (deletes) a key of the tenant (of any tenant when `tenantKey` is undefined: the operator): the
 * next request with it is a 401, on every node, and its open event streams end within seconds.
 */
export async function revokeApiKey(db: Queryable, tenantKey: string | undefined, id: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM api_keys WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)', [
    id,
    tenantKey ?? null,
  ]);
  return (rowCount ?? 0) > 0;
}

/** The principal behind an API key, or undefined for an unknown key. */
export async function findApiKeyPrincipal(db: Queryable, key: string): Promise<Principal | undefined> {
  // One statement: an expired key is no key, and last_used_at is written at most once a minute per key
  // (not a write per request).
  const { rows } = await db.query<{ id: string; name: string; tenant_id: string; permissions: string[] }>(
    `WITH k AS (
       SELECT id, name, tenant_id, permissions, last_used_at FROM api_keys
        WHERE key_hash = $1 AND (expires_at IS NULL OR expires_at > now())
     ), touched AS (
       UPDATE api_keys a SET last_used_at = now() FROM k
        WHERE a.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute')
     )
     SELECT id, name, tenant_id, permissions FROM k`,
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
    const created = await createApiKey(db, {
      name: 'bootstrap admin',
      permissions: ['*'],
      tenantKey: '',
      isBootstrap: true,
    });
    return created.key;
  } catch (err) {
    if (isUniqueViolation(err)) return undefined;
    throw err;
  }
}
