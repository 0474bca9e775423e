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
 * The state is a row per key in Postgres, so every API node agrees. Three rules: per client address, per
 * (user name, client address), and a ceiling per user name that spares the user's own clients.
 */
export interface ThrottleRule {
  limit: number;
  windowSeconds: number;
}

/** Per (user name, client address): another address never locks a user out. */
export const USER_NAME_RULE: ThrottleRule = { limit: 5, windowSeconds: 15 * 60 };
/**
 * Per user name, across every client that has not signed in as that user within KNOWN_CLIENT_DAYS: the
 * ceiling on guessing one account from many addresses (a holder of an IPv6 /48 has 65,536 /64s, each
 * with its own USER_NAME_RULE). Counted after USER_NAME_RULE, so one address adds at most 5 in a window
 * and at least 20 must take part to reach it. Past it, attempts from unknown clients get 429 (the
 * doubling blocks of every rule, up to 15 minutes), while the user's own clients (those it signed in from
 * lately) neither count nor are refused: the attack can keep the user from signing in from a new address
 * while it lasts, never from the addresses they use. Slowing instead of refusing would still let the
 * attacker take what the slowed rate allows from every one of its addresses, and a per-user-name lock
 * without the known clients would let anyone lock any user out.
 */
export const ACCOUNT_RULE: ThrottleRule = { limit: 100, windowSeconds: 15 * 60 };
/** How long a client that signed in as a user stays known for it (ACCOUNT_RULE). */
export const KNOWN_CLIENT_DAYS = 30;
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
export const accountKey = (name: string) => `account:${normalizedUserName(name)}`;

/** Whether this client signed in as this user name within KNOWN_CLIENT_DAYS (ACCOUNT_RULE spares it). */
export async function isKnownClient(db: Queryable, name: string, address: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM auth_known_clients
      WHERE user_name = $1 AND client = $2 AND succeeded_at > now() - make_interval(days => $3)`,
    [normalizedUserName(name), throttledClient(address), KNOWN_CLIENT_DAYS],
  );
  return rows.length > 0;
}

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

/**
 * A successful sign-in: the (user, address) count is cleared, the address (and the user name's ceiling,
 * when the attempt was counted there) gets its attempt back, and the client is known for the user name
 * from now on.
 */
export async function attemptSucceeded(
  db: Queryable,
  name: string,
  address: string,
  opts: { accountCounted: boolean },
): Promise<void> {
  await db.query(
    `WITH cleared AS (DELETE FROM auth_throttle WHERE key = $1),
          known AS (INSERT INTO auth_known_clients (user_name, client, succeeded_at) VALUES ($3, $4, now())
                    ON CONFLICT (user_name, client) DO UPDATE SET succeeded_at = excluded.succeeded_at)
     UPDATE auth_throttle SET failures = greatest(failures - 1, 0)
      WHERE key = ANY($2::text[]) AND (blocked_until IS NULL OR blocked_until <= now())`,
    [
      userAddressKey(name, address),
      opts.accountCounted ? [addressKey(address), accountKey(name)] : [addressKey(address)],
      normalizedUserName(name),
      throttledClient(address),
    ],
  );
}

/**
 * Throttle rows that no longer matter (contract section 8): their window (15 minutes at most) began more
 * than an hour ago and they are not blocked now; and clients known for a user name whose last sign-in
 * from there is older than KNOWN_CLIENT_DAYS. Returns how many went.
 */
export async function purgeThrottle(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `WITH spent AS (
       DELETE FROM auth_throttle
        WHERE window_start < now() - interval '1 hour' AND (blocked_until IS NULL OR blocked_until < now())
       RETURNING 1),
     forgotten AS (
       DELETE FROM auth_known_clients WHERE succeeded_at < now() - make_interval(days => $1) RETURNING 1)
     SELECT ((SELECT count(*) FROM spent) + (SELECT count(*) FROM forgotten))::int AS n`,
    [KNOWN_CLIENT_DAYS],
  );
  return rows[0]!.n;
}
