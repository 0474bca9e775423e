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
