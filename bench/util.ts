import pg from 'pg';

// ---------------------------------------------------------------------------------------------------
// Small helpers

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
export const round = (v: number, d = 1) => Math.round(v * 10 ** d) / 10 ** d;

/** Latencies summarised: count, total, median, 95th percentile, maximum. */
export interface Stat {
  n: number;
  totalMs: number;
  medianMs: number;
  p95Ms: number;
  maxMs: number;
}

export function stat(values: number[]): Stat {
  if (values.length === 0) return { n: 0, totalMs: 0, medianMs: 0, p95Ms: 0, maxMs: 0 };
  const s = [...values].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  const total = s.reduce((a, b) => a + b, 0);
  return {
    n: s.length,
    totalMs: round(total),
    medianMs: round(at(0.5)),
    p95Ms: round(at(0.95)),
    maxMs: round(s[s.length - 1]!),
  };
}

export function dbUrl(adminUrl: string, database: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${database}`;
  return u.toString();
}

export function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

/**
 * Runs a seeding statement with the instance outbox off (`SET LOCAL wfa.outbox = 'off'`, migration 011): the bench's seeded rows are what plans alter, and get no Temporal workflow each.
 */
/** BENCH_RANDOM_IDS=1: seeded instances get random ids (UUIDv4), as every bench seeded them before 2026-11-28. */
export const RANDOM_IDS = process.env.BENCH_RANDOM_IDS === '1';

/**
 * The id of the seeded instance numbered `n`, created at `createdAt` (both SQL expressions): by default shaped as
 * the service's own instance ids (src/ids.ts `newId`, a UUIDv7: the creation time's milliseconds, then an order
 * within them, then random bits), so that ids follow creation order, as in a table the service filled. The
 * primary key then holds the instances of a plan's batch, generated in creation order, on a few neighbouring
 * pages. With BENCH_RANDOM_IDS=1 they are random (UUIDv4): a batch of 2,000 instances of 1,000,000 then reads
 * about as many pages of the primary key, which a table of ids the service made never asks of it.
 */
/** When the seeded instance numbered `n` was created: a microsecond apart each, in the order of `n`. */
export const SEEDED_AT = "now() + n * interval '1 microsecond'";

export function seededId(n: string, createdAt: string): string {
  if (RANDOM_IDS) return 'gen_random_uuid()::text';
  return `(lpad(to_hex(floor(extract(epoch FROM ${createdAt}) * 1000)::bigint), 12, '0')
    || '7' || lpad(to_hex((${n} >> 26) & 4095), 3, '0') || to_hex(8 | ((${n} >> 24) & 3))
    || lpad(to_hex(${n} & 16777215), 6, '0') || substr(md5(random()::text), 1, 9))::uuid::text`;
}

export async function seedWithoutWorkflows(db: pg.Pool | pg.Client, sql: string, params: unknown[]) {
  const client = db instanceof pg.Pool ? await db.connect() : db;
  try {
    await client.query('BEGIN');
    await client.query("SET LOCAL wfa.outbox = 'off'");
    const result = await client.query(sql, params);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    if (db instanceof pg.Pool) (client as pg.PoolClient).release();
  }
}

export const HTTP_CONNECTION_TYPE = 'Elsa.Connections.Http.HttpConnectionConfiguration';

/** A workflow definition whose one step is a Send HTTP Request (`method` to `path`) through a saved connection. */
export function oneCallDefinition(definitionId: string, connectionName: string, method: string, callPath: string) {
  const text = (value: string) => ({ typeName: 'String', expression: { type: 'Literal', value } });
  return {
    definitionId,
    root: {
      type: 'Elsa.Flowchart',
      id: 'flow1',
      activities: [
        {
          id: 'call',
          type: 'Elsa.Http.SendHttpRequest',
          version: 1,
          connection: {
            typeName: `ConnectionProperties<${HTTP_CONNECTION_TYPE}>`,
            expression: { type: 'Literal', value: { connectionName } },
          },
          method: text(method),
          path: text(callPath),
        },
      ],
      connections: [],
    },
  };
}

export async function recreateDatabase(adminUrl: string, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(database)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
  } finally {
    await admin.end();
  }
}
