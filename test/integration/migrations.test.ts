import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ensureBootstrapApiKey, findApiKeyPrincipal } from '../../src/auth/api-keys.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { ensureDatabase } from '../../src/embedded/postgres.js';

const pools: pg.Pool[] = [];
const databases: string[] = [];

async function freshDatabase(): Promise<string> {
  const name = `wfa_empty_${randomBytes(5).toString('hex')}`;
  await ensureDatabase(inject('pgAdminUrl'), name);
  databases.push(name);
  const url = new URL(inject('pgAdminUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await admin.connect();
  for (const d of databases) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(d)} WITH (FORCE)`);
  await admin.end();
});

describe('migrations', () => {
  it('two processes migrating an empty database at once apply each migration exactly once', async () => {
    const url = await freshDatabase();
    const a = createPool(url, 2);
    const b = createPool(url, 2);
    pools.push(a, b);
    const [appliedA, appliedB] = await Promise.all([migrate(a), migrate(b)]);
    const all = [...appliedA, ...appliedB].sort((x, y) => x - y);
    const { rows } = await a.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(all).toEqual(rows.map((r) => r.version));
    expect(rows.length).toBeGreaterThan(0);
    // A third start finds nothing to do.
    expect(await migrate(a)).toEqual([]);
  });

  it('the bootstrap admin key is generated once, even by two processes starting together', async () => {
    const url = await freshDatabase();
    const pool = createPool(url, 4);
    pools.push(pool);
    await migrate(pool);
    const keys = (await Promise.all([ensureBootstrapApiKey(pool), ensureBootstrapApiKey(pool)])).filter(
      Boolean,
    ) as string[];
    expect(keys).toHaveLength(1);
    expect(await ensureBootstrapApiKey(pool)).toBeUndefined();
    const principal = await findApiKeyPrincipal(pool, keys[0]!);
    expect(principal).toMatchObject({ permissions: ['*'], tenantId: null });
    const { rows } = await pool.query('SELECT key_hash FROM api_keys WHERE is_bootstrap');
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash).not.toContain(keys[0]);
  });
});
