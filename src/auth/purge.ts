import type { Queryable } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { purgeThrottle } from './throttle.js';
import { purgeSpentSessions } from './tokens.js';

const EVERY_MS = 10 * 60_000;

/**
 * Removes, now and then every ten minutes, the identity rows that can no longer matter: throttle rows of
 * past windows, spent refresh tokens and ended sessions. Each API node runs it; the deletes are idempotent,
 * so nodes running it at once only repeat each other. Returns the stop.
 */
export function startIdentityPurge(
  db: Queryable,
  logger: Logger,
  accessTokenLifetimeSeconds: number,
  everyMs = EVERY_MS,
): () => Promise<void> {
  let running: Promise<void> | undefined;
  const run = () => {
    running ??= (async () => {
      try {
        const removed = (await purgeThrottle(db)) + (await purgeSpentSessions(db, accessTokenLifetimeSeconds));
        if (removed > 0) logger.debug({ removed }, 'purged spent throttle rows, refresh tokens and sessions');
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'purging spent identity rows failed; it runs again later');
      } finally {
        running = undefined;
      }
    })();
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
