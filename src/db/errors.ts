/**
 * SQLSTATE codes this service branches on, by name (https://www.postgresql.org/docs/current/errcodes-appendix.html),
 * and the one rule that says whether a failure is worth retrying.
 */
export const SQLSTATE = {
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
  duplicateDatabase: '42P04',
  queryCanceled: '57014',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  lockNotAvailable: '55P03',
  adminShutdown: '57P01',
  crashShutdown: '57P02',
  cannotConnectNow: '57P03',
} as const;

/** The SQLSTATE of a node-postgres error, if it carries one. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

export const isUniqueViolation = (err: unknown) => sqlState(err) === SQLSTATE.uniqueViolation;

/** Node network error codes that mean "the other side is not there right now". */
const TRANSIENT_NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/**
 * True when retrying the same work later may succeed: the database or a peer was unreachable, a
 * connection broke, the pool had no connection in time, or Postgres asked for a retry (serialization
 * failure, deadlock, shutdown, too many connections). Everything else (bad data, SQLSTATE class 22; a
 * failed constraint, class 23; a wrong query, class 42; a bug in our code) fails the same way every time
 * and must not be retried forever.
 */
export function isTransientError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const state = sqlState(e);
    if (state) {
      const cls = state.slice(0, 2);
      // 08 connection exception, 53 insufficient resources, 57 operator intervention (shutdown, statement
      // timeout under load), 58 system error, 40 transaction rollback (serialization, deadlock).
      if (['08', '53', '57', '58', '40'].includes(cls) || state === SQLSTATE.lockNotAvailable) return true;
      return false;
    }
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && TRANSIENT_NETWORK_CODES.has(code)) return true;
    // A tenant's turn at a shared resource did not come in time (src/shares.ts): later it may.
    if (e instanceof Error && e.name === 'ShareTimeoutError') return true;
    const message = e instanceof Error ? e.message : '';
    // node-postgres: the pool gave no client within connectionTimeoutMillis, or the socket closed mid-query.
    if (
      /timeout exceeded when trying to connect|Connection terminated|connection timeout|Client has encountered a connection error/i.test(
        message,
      )
    ) {
      return true;
    }
  }
  return false;
}
