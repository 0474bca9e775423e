import { isIP } from 'node:net';
import type { Queryable } from '../db/pool.js';
import { TooManyAttemptsError } from '../errors.js';

/**
 * Guessing is throttled (contract section 8). Each attempt is counted against its keys *before* it is
 * checked, in one atomic statement per key (the row lock of `ON CONFLICT DO UPDATE` orders parallel
 * attempts), so a parallel burst never gets more than `limit` attempts checked. An attempt past the limit
 * blocks the key for a minute; an attempt after a block ended, while the window's count still stands, blocks
 * it again for twice as long, up to 15 minutes. Attempts made while a key is blocked are refused without
 * counting, so one burst cannot push a block to its maximum. A successful sign-in takes its attempt back.
 * The state is a row per key in Postgres, so every API node agrees.
 */
export interface ThrottleRule {
  limit: number;
  windowSeconds: number;
}

/** Per (user name, client address): another address never locks a user out. */
export const USER_NAME_RULE: ThrottleRule = { limit: 5, windowSeconds: 15 * 60 };
/** Per client address: failed sign-ins and unknown API keys together. */
export const ADDRESS_RULE: ThrottleRule = { limit: 20, windowSeconds: 60 };
const FIRST_BLOCK_SECONDS = 60;
const MAX_BLOCK_SECONDS = 15 * 60;

/** A user name as people tell names apart: case, surrounding space and compatibility forms do not count. */
export const normalizedUserName = (name: string) => name.normalize('NFKC').trim().toLowerCase();
/**
 * The client an address stands for, as throttling counts it: an IPv4 address itself, an IPv6 address its
 * /64 (one subscriber is usually given a whole /64, so a guesser could otherwise take a new address for
 * every attempt).
 */
export function throttledClient(address: string): string {
  if (isIP(address) !== 6) return address;
  const [head, tail] = address.toLowerCase().split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  // Only the first four groups count; a dotted IPv4 tail (rare past the mapped form) does not reach them.
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
export const userAddressKey = (name: string, address: string) =>
  `user:${normalizedUserName(name)}@${throttledClient(address)}`;
export const addressKey = (address: string) => `addr:${throttledClient(address)}`;

/**
 * Counts one attempt for `key` under `rule`, atomically, and throws 429 with Retry-After when the key is
 * blocked or this attempt is over the limit (a blocked key's attempts are not counted).
 * The wait is capped at the block's length: a statement that began before the one that set the block
 * (and waited on its row lock) has an earlier now() and would otherwise report a second too many.
 */
export async function countAttempt(db: Queryable, key: string, rule: ThrottleRule): Promise<void> {
  const { rows } = await db.query<{ wait: number | null }>(
    `INSERT INTO auth_throttle AS t (key, failures, window_start) VALUES ($1, 1, now())
     ON CONFLICT (key) DO UPDATE SET
       failures = CASE
         WHEN t.blocked_until > now() THEN t.failures
         WHEN t.window_start < now() - make_interval(secs => $2) THEN 1
         ELSE t.failures + 1 END,
       window_start = CASE
         WHEN t.blocked_until > now() THEN t.window_start
         WHEN t.window_start < now() - make_interval(secs => $2) THEN now()
         ELSE t.window_start END,
       block_seconds = CASE
         WHEN t.blocked_until > now() THEN t.block_seconds
         WHEN t.window_start < now() - make_interval(secs => $2) THEN 0
         WHEN t.failures + 1 > $3 THEN least($4, greatest($5, t.block_seconds * 2))
         ELSE t.block_seconds END,
       blocked_until = CASE
         WHEN t.blocked_until > now() THEN t.blocked_until
         WHEN t.window_start < now() - make_interval(secs => $2) THEN NULL
         WHEN t.failures + 1 > $3 THEN now() + make_interval(secs => least($4, greatest($5, t.block_seconds * 2)))
         ELSE t.blocked_until END
     RETURNING least(block_seconds, ceil(extract(epoch FROM blocked_until - now())))::int AS wait`,
    [key, rule.windowSeconds, rule.limit, MAX_BLOCK_SECONDS, FIRST_BLOCK_SECONDS],
  );
  const wait = rows[0]?.wait;
  if (wait && wait > 0) throw new TooManyAttemptsError(`Too many failed attempts; try again in ${wait} seconds`, wait);
}

/** A successful sign-in: the (user, address) count is cleared and the address gets its attempt back. */
export async function attemptSucceeded(db: Queryable, userKey: string, addrKey: string): Promise<void> {
  await db.query(
    `WITH cleared AS (DELETE FROM auth_throttle WHERE key = $1)
     UPDATE auth_throttle SET failures = greatest(failures - 1, 0)
      WHERE key = $2 AND (blocked_until IS NULL OR blocked_until <= now())`,
    [userKey, addrKey],
  );
}

/**
 * Throttle rows that no longer matter (contract section 8): their window (15 minutes at most) began more
 * than an hour ago and they are not blocked now. Returns how many went.
 */
export async function purgeThrottle(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM auth_throttle
      WHERE window_start < now() - interval '1 hour' AND (blocked_until IS NULL OR blocked_until < now())`,
  );
  return rowCount ?? 0;
}
