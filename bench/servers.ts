import path from 'node:path';
import type { Config } from '../src/config.js';
import { startEmbeddedPostgres } from '../src/embedded/postgres.js';
import { startDevServer } from '../src/temporal/devserver.js';
import { freePort } from '../test/support/free-port.js';

/**
 * What a one-process bench runs against: DATABASE_URL's server (its maintenance database) or an embedded Postgres
 * in `work`, and TEMPORAL_ADDRESS or a Temporal dev server whose SQLite file is in `work`. Each one started here
 * registers its stop first in `stops` (so that stops run newest first).
 */
export async function benchServers(
  config: Config,
  work: string,
  stops: (() => Promise<unknown>)[],
): Promise<{ adminUrl: string; temporalAddress: string }> {
  const adminUrl = await benchPostgres(config, work, stops);
  let temporalAddress = config.temporal.address;
  if (!temporalAddress) {
    const env = await startDevServer({
      cliPath: config.temporal.cliPath,
      cacheDir: config.cacheDir,
      dbFilename: path.join(work, 'temporal.sqlite'),
      namespace: config.temporal.namespace,
      port: await freePort(),
      uiPort: 0,
    });
    stops.unshift(() => env.teardown());
    temporalAddress = env.address;
  }
  return { adminUrl, temporalAddress };
}

/** `benchServers`' Postgres alone: DATABASE_URL's server (its maintenance database) or an embedded one in `work`. */
export async function benchPostgres(config: Config, work: string, stops: (() => Promise<unknown>)[]): Promise<string> {
  if (config.databaseUrl) {
    const u = new URL(config.databaseUrl);
    u.pathname = '/postgres';
    return u.toString();
  }
  const handle = await startEmbeddedPostgres({
    dataDir: path.join(work, 'postgres'),
    port: await freePort(),
    database: 'postgres',
    persistent: false,
  });
  stops.unshift(() => handle.stop());
  return handle.adminUrl;
}
