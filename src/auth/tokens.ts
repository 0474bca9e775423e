import { noteAudit } from '../audit/scope.js';
import {
  ACCOUNT_RULE,
  accountKey,
  addressKey,
  ADDRESS_RULE,
  attemptSucceeded,
  countAttempt,
  isKnownClient,
  userAddressKey,
  USER_NAME_RULE,
} from './throttle.js';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type pg from 'pg';
import { type Queryable, withTransaction } from '../db/pool.js';
import { UnauthorizedError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from './principal.js';
import { tenantOut } from './principal.js';
import { EFFECTIVE_GRANTS_SQL, loadUser, type StoredUser, verifyCredentials } from './users.js';
import { type Clock, now as nowBy } from '../vocabulary/clock.js';

export interface TokenSettings {
  /** HMAC-SHA256 key for both token kinds. */
  key: Uint8Array;
  /**
   * Keys of before a rotation (AUTH_SIGNING_KEY_PREVIOUS): tokens they signed are still accepted until they
   * expire; new tokens are signed with `key` only.
   */
  previousKeys?: Uint8Array[];
  accessTokenLifetimeSeconds: number;
  refreshTokenLifetimeSeconds: number;
  clock?: Clock;
}

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
}

const ISSUER = 'workflow-alterations';
/** Why a session was revoked when a rotated refresh token came back (it leaked). */
const REUSE_REASON = 'refresh token reused';
const ACCESS_TYP = 'at+jwt';
const REFRESH_TYP = 'rt+jwt';

/**
 * The signing key: AUTH_SIGNING_KEY when set, else one generated once and kept in the data folder (so
 * tokens survive a restart). Nodes of a cluster must share AUTH_SIGNING_KEY.
 */
export async function loadSigningKey(configured: string | undefined, dataDir: string): Promise<Uint8Array> {
  if (configured) return new TextEncoder().encode(configured);
  const file = path.join(dataDir, 'auth-signing-key');
  try {
    return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64url');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dataDir, { recursive: true });
  const key = randomBytes(32);
  try {
    await writeFile(file, key.toString('base64url'), { mode: 0o600, flag: 'wx' });
    return key;
  } catch (err) {
    // Another process wrote it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64url');
    throw err;
  }
}

const nowOf = (s: TokenSettings) => nowBy(s.clock);

/** Verifies with the current key, then with each previous one (a rotation in progress). */
async function verifyToken(s: TokenSettings, token: string, typ: string) {
  const options = { issuer: ISSUER, typ, algorithms: ['HS256'], currentDate: nowOf(s) };
  try {
    return await jwtVerify(token, s.key, options);
  } catch (err) {
    if (!(err instanceof joseErrors.JWSSignatureVerificationFailed)) throw err;
    for (const key of s.previousKeys ?? []) {
      try {
        return await jwtVerify(token, key, options);
      } catch (again) {
        if (!(again instanceof joseErrors.JWSSignatureVerificationFailed)) throw again;
      }
    }
    throw err;
  }
}

/** The payload of a token of kind `typ`, or a 401 that says it has expired (`expired`) or is not valid. */
async function payloadOf(s: TokenSettings, token: string, typ: string, what: string, expired: string) {
  try {
    return (await verifyToken(s, token, typ)).payload;
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw new UnauthorizedError(expired);
    throw new UnauthorizedError(`The ${what} is not valid`);
  }
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

async function issue(db: Queryable, s: TokenSettings, user: StoredUser, sessionId: string): Promise<TokenPair> {
  const now = nowOf(s);
  const iat = seconds(now);
  const claims: Record<string, unknown> = {
    name: user.name,
    sid: sessionId,
    permissions: user.permissions.length > 0 ? user.permissions : ['none'],
  };
  if (user.tenantKey !== '') claims.tenantId = user.tenantKey;
  const accessToken = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: ACCESS_TYP })
    .setSubject(user.id)
    .setIssuer(ISSUER)
    .setIssuedAt(iat)
    .setExpirationTime(iat + s.accessTokenLifetimeSeconds)
    .sign(s.key);
  const jti = newId();
  const refreshExpires = iat + s.refreshTokenLifetimeSeconds;
  const refreshToken = await new SignJWT({ sid: sessionId })
    .setProtectedHeader({ alg: 'HS256', typ: REFRESH_TYP })
    .setSubject(user.id)
    .setIssuer(ISSUER)
    .setJti(jti)
    .setIssuedAt(iat)
    .setExpirationTime(refreshExpires)
    .sign(s.key);
  await db.query('INSERT INTO refresh_tokens (jti, session_id, issued_at, expires_at) VALUES ($1, $2, $3, $4)', [
    jti,
    sessionId,
    now,
    new Date(refreshExpires * 1000),
  ]);
  return { accessToken, refreshToken, tokenType: 'Bearer', expiresIn: s.accessTokenLifetimeSeconds };
}

/** Signs in: a new session and its first token pair. */
export async function login(
  pool: pg.Pool,
  s: TokenSettings,
  username: string,
  password: string,
  address = 'in-process',
): Promise<TokenPair> {
  // Guessing is throttled per client address, per (user name, client address) and, from clients the user
  // has not signed in from lately, per user name (src/auth/throttle.ts): each attempt is counted before
  // any password is checked, so a parallel burst gets no more attempts than the limit.
  await countAttempt(pool, addressKey(address), ADDRESS_RULE);
  await countAttempt(pool, userAddressKey(username, address), USER_NAME_RULE);
  const accountCounted = !(await isKnownClient(pool, username, address));
  if (accountCounted) await countAttempt(pool, accountKey(username), ACCOUNT_RULE);
  const user = await verifyCredentials(pool, username, password);
  if (!user) throw new UnauthorizedError('Unknown user name or wrong password');
  noteAudit({
    actor: { kind: 'user', id: user.id, name: user.name },
    tenantKey: user.tenantKey,
    targetId: user.id,
    signedIn: true,
  });
  await attemptSucceeded(pool, username, address, { accountCounted });
  const sessionId = newId();
  await pool.query('INSERT INTO sessions (id, user_id, tenant_id, created_at) VALUES ($1, $2, $3, $4)', [
    sessionId,
    user.id,
    user.tenantKey,
    nowOf(s),
  ]);
  return issue(pool, s, user, sessionId);
}

async function verifyRefreshToken(s: TokenSettings, token: string): Promise<{ sub: string; sid: string; jti: string }> {
  if (token.trim() === '') throw new UnauthorizedError('The refresh token is blank');
  const payload = await payloadOf(s, token, REFRESH_TYP, 'refresh token', 'The refresh token has expired');
  if (typeof payload.sub !== 'string' || payload.sub.trim() === '')
    throw new UnauthorizedError('The refresh token has no subject; sign in again');
  if (typeof payload.sid !== 'string' || typeof payload.jti !== 'string')
    throw new UnauthorizedError('The refresh token is not valid');
  return { sub: payload.sub, sid: payload.sid, jti: payload.jti };
}

/**
 * Rotates a refresh token: the presented one stops working and a new pair is issued with the user's
 * current grants. A rotated token presented again means it leaked: the whole session is revoked.
 */
export async function refresh(pool: pg.Pool, s: TokenSettings, token: string): Promise<TokenPair> {
  const { sub, sid, jti } = await verifyRefreshToken(s, token);
  const outcome = await withTransaction(pool, async (client) => {
    const { rows: sessions } = await client.query<{ user_id: string; revoked_at: Date | null }>(
      'SELECT user_id, revoked_at FROM sessions WHERE id = $1 FOR UPDATE',
      [sid],
    );
    const session = sessions[0];
    if (!session) return { error: 'The session of this refresh token does not exist (signed out or user deleted)' };
    if (session.user_id !== sub) return { error: 'The refresh token subject does not match its session' };
    if (session.revoked_at) return { error: 'The session of this refresh token was revoked' };
    const { rows: tokens } = await client.query<{ used_at: Date | null }>(
      'SELECT used_at FROM refresh_tokens WHERE jti = $1 AND session_id = $2',
      [jti, sid],
    );
    const stored = tokens[0];
    if (!stored) return { error: 'Unknown refresh token' };
    if (stored.used_at) {
      await client.query('UPDATE sessions SET revoked_at = $2, revoked_reason = $3 WHERE id = $1', [
        sid,
        nowOf(s),
        REUSE_REASON,
      ]);
      return { error: 'This refresh token was already used; the session is revoked', reuse: true };
    }
    const user = await loadUser(client, sub);
    if (!user) return { error: 'The subject of this refresh token does not exist' };
    await client.query('UPDATE refresh_tokens SET used_at = $2 WHERE jti = $1', [jti, nowOf(s)]);
    return { pair: await issue(client, s, user, sid) };
  });
  if ('error' in outcome) throw new UnauthorizedError(outcome.error!);
  return outcome.pair;
}

/**
 * Signs out: revokes the caller's session (its refresh tokens stop working at once). A refresh token
 * given in the body must belong to the caller; its session is the one revoked.
 */
export async function logout(
  pool: pg.Pool,
  s: TokenSettings,
  principal: Principal,
  refreshToken?: string,
): Promise<void> {
  let sessionId = principal.sessionId;
  if (refreshToken) {
    const t = await verifyRefreshToken(s, refreshToken);
    if (t.sub !== principal.id) throw new UnauthorizedError('The refresh token belongs to another user');
    sessionId = t.sid;
  }
  if (!sessionId) return; // An API key has no session.
  await pool.query(
    "UPDATE sessions SET revoked_at = coalesce(revoked_at, $3), revoked_reason = coalesce(revoked_reason, 'signed out') WHERE id = $1 AND user_id = $2",
    [sessionId, principal.id, nowOf(s)],
  );
}

/**
 * The principal of an access token. Signed, unexpired and of this service; its session must still exist:
 * a signed-out session's access tokens work until they expire, a deleted user's stop at once.
 */
export async function principalFromAccessToken(pool: pg.Pool, s: TokenSettings, token: string): Promise<Principal> {
  const payload = await payloadOf(s, token, ACCESS_TYP, 'access token', 'The access token has expired; refresh it');
  const { sub, sid, name, permissions, tenantId } = payload as {
    sub?: string;
    sid?: string;
    name?: string;
    permissions?: unknown;
    tenantId?: string;
  };
  if (!sub || !sid || !Array.isArray(permissions)) throw new UnauthorizedError('The access token is not valid');
  // A signed-out session's access tokens work until they expire; one revoked because its refresh token was
  // stolen (a rotated token presented again) stops at once, since the thief may hold its access token too.
  const { rows } = await pool.query<{ revoked_reason: string | null }>(
    'SELECT revoked_reason FROM sessions WHERE id = $1 AND user_id = $2',
    [sid, sub],
  );
  if (!rows[0]) throw new UnauthorizedError('The session of this access token no longer exists');
  if (rows[0].revoked_reason === REUSE_REASON)
    throw new UnauthorizedError('The session of this access token was revoked: its refresh token was used twice');
  return {
    kind: 'user',
    id: sub,
    name: name ?? sub,
    tenantId: tenantOut(tenantId ?? ''),
    permissions: permissions.filter((p): p is string => typeof p === 'string' && p !== 'none'),
    sessionId: sid,
  };
}

/**
 * The principal of a console session (src/console/session.ts), whose cookie holds the session's refresh
 * token as sign-in issued it; the console never rotates it. Unlike an access token, it is checked against
 * Postgres on every request, so that a sign-out ends it at once: the token is signed, of this service and
 * unexpired; its row is unused (a refresh through `/identity/refresh` ends the console's hold on it) and
 * unexpired; its session is not revoked; its user still exists. The grants are the user's current ones.
 */
export async function principalFromSessionToken(db: Queryable, s: TokenSettings, token: string): Promise<Principal> {
  const { sub, sid, jti } = await verifyRefreshToken(s, token);
  const { rows } = await db.query<{ id: string; name: string; tenant_id: string; permissions: string[] }>(
    `SELECT u.id, u.name, u.tenant_id, ${EFFECTIVE_GRANTS_SQL} AS permissions
       FROM refresh_tokens t JOIN sessions x ON x.id = t.session_id JOIN users u ON u.id = x.user_id
      WHERE t.jti = $1 AND t.session_id = $2 AND x.user_id = $3
        AND t.used_at IS NULL AND t.expires_at > $4 AND x.revoked_at IS NULL`,
    [jti, sid, sub, nowOf(s)],
  );
  const user = rows[0];
  if (!user) throw new UnauthorizedError('The session has ended (signed out, expired, or its user was deleted)');
  return {
    kind: 'user',
    id: user.id,
    name: user.name,
    tenantId: tenantOut(user.tenant_id),
    permissions: user.permissions,
    sessionId: sid,
  };
}

/**
 * Whether a principal authenticated earlier may still act: its API key still exists and has not expired,
 * or its user's session still exists and is not signed out. Long-lived answers (event streams) ask this
 * again every few seconds, so a revoked key, a deleted user or a sign-out ends them.
 */
export async function stillSignedIn(db: Queryable, principal: Principal, isAdminKey: boolean): Promise<boolean> {
  if (principal.kind === 'api-key') {
    if (isAdminKey) return true;
    const { rowCount } = await db.query(
      'SELECT 1 FROM api_keys WHERE id = $1 AND (expires_at IS NULL OR expires_at > now())',
      [principal.id],
    );
    return (rowCount ?? 0) > 0;
  }
  const { rowCount } = await db.query('SELECT 1 FROM sessions WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL', [
    principal.sessionId ?? '',
    principal.id,
  ]);
  return (rowCount ?? 0) > 0;
}

/**
 * Sessions and refresh tokens that can no longer matter (contract section 8): a refresh token once it has
 * expired (a spent one is kept until then, so that presenting it again still revokes its session); a
 * session once it was revoked, or its last refresh token expired, longer ago than an access token lives
 * (its access tokens have all expired). Returns how many rows went.
 */
export async function purgeSpentSessions(db: Queryable, accessTokenLifetimeSeconds: number): Promise<number> {
  const tokens = await db.query('DELETE FROM refresh_tokens WHERE expires_at < now() - make_interval(secs => $1)', [
    accessTokenLifetimeSeconds,
  ]);
  const sessions = await db.query(
    `DELETE FROM sessions s
      WHERE s.revoked_at < now() - make_interval(secs => $1)
         OR (s.created_at < now() - make_interval(secs => $1)
             AND NOT EXISTS (SELECT 1 FROM refresh_tokens r
                              WHERE r.session_id = s.id AND r.expires_at > now() - make_interval(secs => $1)))`,
    [accessTokenLifetimeSeconds],
  );
  return (tokens.rowCount ?? 0) + (sessions.rowCount ?? 0);
}
