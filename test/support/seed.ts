import type pg from 'pg';
import { inTransaction } from './pools.js';

export interface SeedOptions {
  definitionVersionId: string;
  count: number;
  tenantId?: string;
  /** Defaults: suspended at activity "wait" on event "approve", with the variables given. */
  variables?: Record<string, unknown>;
  bookmarks?: { activityId: string; eventName: string }[];
  subStatus?: string;
  namePrefix?: string;
}

/**
 * Runs a seeding statement with the instance outbox off (`SET LOCAL wfa.outbox = 'off'`, migration 011): seeded rows are what tests and benches alter, and get no Temporal workflow each,
 * which would start a workflow per seeded row on the shared Temporal server.
 */
export async function withoutWorkflows<T extends pg.QueryResultRow>(
  pool: pg.Pool,
  sql: string,
  params: unknown[],
): Promise<pg.QueryResult<T>> {
  return inTransaction(pool, async (client) => {
    await client.query("SET LOCAL wfa.outbox = 'off'");
    return client.query<T>(sql, params);
  });
}

/**
 * Inserts instances of a stored definition version directly in SQL (one statement), as if they had run
 * to a suspended state: fast enough for the thousands a durability or concurrency test needs. They have
 * no Temporal workflow (`withoutWorkflows`). Returns their ids in creation order.
 */
export async function seedInstances(pool: pg.Pool, o: SeedOptions): Promise<string[]> {
  const { rows } = await withoutWorkflows<{ id: string }>(
    pool,
    `INSERT INTO workflow_instances
       (id, tenant_id, definition_id, definition_version_id, version, name, correlation_id, status, sub_status,
        variables, scheduled, bookmarks, created_at, updated_at)
     SELECT gen_random_uuid()::text, $2, d.definition_id, d.id, d.version, $6 || n, 'seed-' || n, 'Running', $5,
            $3::jsonb, '[]'::jsonb, $4::jsonb, now() + n * interval '1 microsecond', now()
       FROM workflow_definitions d, generate_series(1, $7::int) AS n
      WHERE d.id = $1
      ORDER BY n
     RETURNING id`,
    [
      o.definitionVersionId,
      o.tenantId ?? '',
      JSON.stringify(o.variables ?? {}),
      JSON.stringify(o.bookmarks ?? [{ activityId: 'wait', eventName: 'approve' }]),
      o.subStatus ?? 'Suspended',
      o.namePrefix ?? 'seeded-',
      o.count,
    ],
  );
  const { rows: ordered } = await pool.query<{ id: string }>(
    'SELECT id FROM workflow_instances WHERE id = ANY($1::text[]) ORDER BY created_at, id',
    [rows.map((r) => r.id)],
  );
  return ordered.map((r) => r.id);
}
