import type { Queryable } from '../db/pool.js';
import { TooManyAttemptsError } from '../errors.js';

/**
 * Guessing is throttled (contract section 8): after `limit` failures for one key within `windowSeconds`,
 * the key is blocked for a minute, and each further failure while the count stands doubles the block, up
 * to 15 minutes. The state is a row per key in Postgres, so every API node agrees.
 */
export interface ThrottleRule {
  limit: number;
  windowSeconds: number;
}

export const USER_NAME_RULE: ThrottleRule = { limit: 5, windowSeconds: 15 * 60 };
export const ADDRESS_RULE: ThrottleRule = { limit: 20, windowSeconds: 60 };
const FIRST_BLOCK_SECONDS = 60;
const MAX_BLOCK_SECONDS = 15 * 60;

export const userKey = (name: string) => `user:${name.trim().toLowerCase()}`;
export const addressKey = (address: string) => `addr:${address}`;

/** 429 with Retry-After when any of the keys is blocked now; one indexed read. */
export async function assertNotBlocked(db: Queryable, keys: readonly string[]): Promise<void> {
  const { rows } = await db.query<{ wait: number }>(
    `SELECT ceil(extract(epoch FROM max(blocked_until) - now()))::int AS wait
       FROM auth_throttle WHERE key = ANY($1::text[]) AND blocked_until > now()`,
    [[...keys]],
  );
  const wait = rows[0]?.wait;
  if (wait && wait > 0) {
    throw new TooManyAttemptsError(`Too many failed attempts; try again in ${wait} seconds`, wait);
  }
}

/** Counts one failure for `key`; blocks it when the rule's limit is reached. */
export async function recordFailure(db: Queryable, key: string, rule: ThrottleRule): Promise<void> {
  const { rows } = await db.query<{ failures: number }>(
    `INSERT INTO auth_throttle AS t (key, failures, window_start) VALUES ($1, 1, now())
     ON CONFLICT (key) DO UPDATE SET
       failures      = CASE WHEN t.window_start < now() - make_interval(secs => $2) THEN 1 ELSE t.failures + 1 END,
       block_seconds = CASE WHEN t.window_start < now() - make_interval(secs => $2) THEN 0 ELSE t.block_seconds END,
       window_start  = CASE WHEN t.window_start < now() - make_interval(secs => $2) THEN now() ELSE t.window_start END
     RETURNING failures`,
    [key, rule.windowSeconds],
  );
  if ((rows[0]?.failures ?? 0) >= rule.limit) {
    await db.query(
      `UPDATE auth_throttle
          SET block_seconds = least($2, greatest($3, block_seconds * 2)),
              blocked_until = now() + make_interval(secs => least($2, greatest($3, block_seconds * 2)))
        WHERE key = $1`,
      [key, MAX_BLOCK_SECONDS, FIRST_BLOCK_SECONDS],
    );
  }
}

/** A successful sign-in clears the user name's count (not the address's). */
export async function clearFailures(db: Queryable, key: string): Promise<void> {
  await db.query('DELETE FROM auth_throttle WHERE key = $1', [key]);
}
