import type { Queryable } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { LEGACY_REPLACEMENTS } from './permissions.js';

export interface StaleGrant {
  grant: string;
  /** The structured permission to use instead, or null when the permission was removed. */
  replacement: string | null;
  /** Who holds it: `api-key:<name>`, `user:<name>` or `role:<name>`. */
  holders: string[];
}

/** A grant the structured model can match: `*`, or `{resource}:{verb}` that is not a legacy string. */
export function resolvesInStructuredModel(grant: string): boolean {
  if (grant === '*') return true;
  if (grant in LEGACY_REPLACEMENTS) return false;
  const i = grant.lastIndexOf(':');
  return i > 0 && i < grant.length - 1;
}

/** Every stored grant (on API keys, users and roles) that no longer resolves, each once with its holders. */
export async function findStaleGrants(db: Queryable): Promise<StaleGrant[]> {
  const { rows } = await db.query<{ holder: string; grant: string }>(
    `SELECT 'api-key:' || name AS holder, unnest(permissions) AS grant FROM api_keys
     UNION ALL SELECT 'user:' || name, unnest(permissions) FROM users
     UNION ALL SELECT 'role:' || name, unnest(permissions) FROM roles`,
  );
  const stale = new Map<string, StaleGrant>();
  for (const r of rows) {
    if (resolvesInStructuredModel(r.grant)) continue;
    const entry = stale.get(r.grant) ?? {
      grant: r.grant,
      replacement: LEGACY_REPLACEMENTS[r.grant] ?? null,
      holders: [],
    };
    if (!entry.holders.includes(r.holder)) entry.holders.push(r.holder);
    stale.set(r.grant, entry);
  }
  return [...stale.values()].sort((a, b) => (a.grant < b.grant ? -1 : 1));
}

/** At startup in the structured model: one warning per stale grant, naming its replacement or "removed". */
export async function logStaleGrants(db: Queryable, logger: Logger): Promise<StaleGrant[]> {
  const stale = await findStaleGrants(db);
  for (const s of stale) {
    logger.warn(
      { grant: s.grant, replacement: s.replacement ?? 'removed', holders: s.holders },
      s.replacement
        ? `stored permission "${s.grant}" no longer resolves; its replacement is "${s.replacement}"`
        : `stored permission "${s.grant}" no longer resolves; it was removed`,
    );
  }
  return stale;
}
