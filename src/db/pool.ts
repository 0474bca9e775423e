import pg from 'pg';
import type { TenantGate } from '../shares.js';
import { commitScope } from './commit-scope.js';
import { type PostgresConnection, postgresConnection } from './postgres-connection.js';
import { parseTimestamptz } from './timestamps.js';

/** Anything that can run a query: the pool, or a client inside a transaction. Writes accept either. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

/** Statement texts given a name (`prepared`), by text; at most PREPARED_MAX, the rest go unnamed. */
const preparedNames = new Map<string, string>();
const PREPARED_MAX = 256;

/**
 * `text` with `values` as a named prepared statement: each connection parses it once, and Postgres may keep its
 * plan, where an unnamed statement is parsed and planned on every run. For the statements an instance's steps run
 * many times each (reading and locking a row by its key, writing it back): measured, planning was a third of
 * Postgres's time on an outbound-call step (bench/README.md). Only for texts built from constants, so that their
 * number stays small (past PREPARED_MAX distinct texts the statement is sent unnamed, as before).
 */
export function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = preparedNames.get(text);
  if (name === undefined) {
    if (preparedNames.size >= PREPARED_MAX) return { text, values };
    name = `wfa_${preparedNames.size}`;
    preparedNames.set(text, name);
  }
  return { name, text, values };
}

// int8 (bigint, count(*)) as a JS number: every count this service reads is far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
// timestamptz without regular expressions in the common form (src/db/timestamps.ts).
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, parseTimestamptz);

export interface PoolOptions {
  /** Connections at most. */
  max: number;
  /**
   * How long a caller waits for a free connection before failing (a transient error: 503 for the API, a
   * retry for an activity), instead of queueing behind a stuck neighbour forever.
   */
  acquireTimeoutMs?: number;
  /** Postgres cancels any statement of this pool that runs longer (SQLSTATE 57014). */
  statementTimeoutMs?: number;
  /** Shown in pg_stat_activity, so an operator can tell the API's connections from the worker's. */
  applicationName?: string;
  /**
   * Postgres ends a session that stays idle inside a transaction this long (its snapshot and locks with
   * it), so a transaction left open by a stalled caller can never hold a connection or vacuum back for good.
   */
  idleInTransactionTimeoutMs?: number;
}

const DEFAULT_ACQUIRE_TIMEOUT_MS = 10_000;
/** DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS's default: every pool sets one (contract section 8). */
const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

/**
 * A pool on `connection`: DATABASE_URL as `postgresConnection` reads it (its sslmode as libpq means it), or a
 * URL read that way here.
 */
export function createPool(connection: string | PostgresConnection, options: number | PoolOptions = 10): pg.Pool {
  const o: PoolOptions = typeof options === 'number' ? { max: options } : options;
  const c = typeof connection === 'string' ? postgresConnection(connection) : connection;
  const pool = new pg.Pool({
    connectionString: c.connectionString,
    ssl: c.ssl,
    ...(c.sslnegotiation ? { sslnegotiation: c.sslnegotiation } : {}),
    max: o.max,
    connectionTimeoutMillis: o.acquireTimeoutMs ?? DEFAULT_ACQUIRE_TIMEOUT_MS,
    application_name: o.applicationName ?? 'workflow-alterations',
    idle_in_transaction_session_timeout: o.idleInTransactionTimeoutMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    ...(o.statementTimeoutMs ? { statement_timeout: o.statementTimeoutMs } : {}),
    // The server's own id of the session, for a cancel (`cancelStatement`): read before the client is handed out
    // (pg-pool awaits the promise of this hook, though @types/pg types it as void), not queued behind the caller's
    // first statement, which pg deprecates.
    onConnect: readBackendPid as (client: pg.ClientBase) => void,
  });
  // A client losing its connection (a database restart) must not crash the process. The pool handles
  // this for idle clients only; one checked out but between statements (inside a transaction, while the
  // code computes) would emit an unhandled 'error'. Its next statement fails instead, as a transient
  // error that the caller retries, and the pool discards it on release.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return pool;
}

const backendPids = new WeakMap<pg.ClientBase, number>();

/** Reads a new client's session id (`backendPids`); a failure leaves it unknown (no cancel for that client). */
async function readBackendPid(client: pg.ClientBase): Promise<void> {
  try {
    const r = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    backendPids.set(client, r.rows[0]!.pid);
  } catch {
    // The caller's first statement meets the broken connection and reports it.
  }
}

/**
 * Cancels the statement `client` is running, on the server (`pg_cancel_backend`, through another of `pool`'s
 * connections). By the session's id as the server reads it (`pg_backend_pid()`), never the id its start-up
 * message gave: behind a pooler (session mode, docs/operations.md) that one is the pooler's key, and a
 * server process of that number, if any, would be another session's. Nothing when the id is not known yet.
 */
function cancelStatement(pool: pg.Pool, client: pg.ClientBase): void {
  const pid = backendPids.get(client);
  if (pid) void pool.query('SELECT pg_cancel_backend($1)', [pid]).catch(() => undefined);
}

/** The per-tenant share a request's connections count against (src/shares.ts). */
export interface ConnectionShare {
  gate: TenantGate;
  /**
   * All tenants' requests together (one key): fewer than the pool's connections, so that what no tenant's
   * share counts (credential checks, `/health`) always finds one.
   */
  overall?: TenantGate;
  /** The share the request counts against, asked at each connect (the principal is known only after auth). */
  key: () => string;
  /** How long a request waits for its tenant's turn before it fails (a 503). */
  waitMs: number;
}

/** Thrown when a tenant's requests held their whole share of connections for as long as a request may wait. */
export class ConnectionShareTimeout extends Error {
  override name = 'ConnectionShareTimeout';
}

/**
 * A view of `pool` for one API request: the same `query` and `connect`, but
 * - the statements it runs are cancelled on the server (`pg_cancel_backend`) when `signal` aborts, i.e.
 *   when the client went away (without it a dry-run the caller gave up on would keep a connection and a
 *   core busy until it ended);
 * - with `share`, each connection it holds counts against its tenant's share (TENANT_API_CONNECTIONS): a
 *   tenant at its share waits its turn, while other tenants' requests take connections as before.
 */
export function requestPool(pool: pg.Pool, signal: AbortSignal, share?: ConnectionShare): pg.Pool {
  const active = new Set<pg.PoolClient>();
  const onAbort = () => {
    for (const client of active) cancelStatement(pool, client);
  };
  if (!signal.aborted) signal.addEventListener('abort', onAbort, { once: true });
  const aborted = () =>
    Object.assign(new Error('The client closed the connection; the request was abandoned'), { code: 'ECONNRESET' });

  const connect = async (): Promise<pg.PoolClient> => {
    if (signal.aborted) throw aborted();
    let leave = () => undefined as void;
    if (share) {
      const key = share.key();
      const until = Date.now() + share.waitMs;
      let mine: () => void;
      try {
        mine = await share.gate.acquire(key, share.waitMs, signal);
      } catch (err) {
        if (signal.aborted) throw aborted();
        throw new ConnectionShareTimeout(
          `This tenant's requests held all ${share.gate.perTenant} of its database connections on this node (TENANT_API_CONNECTIONS) for ${share.waitMs} ms; retry later`,
          { cause: err },
        );
      }
      let all = () => undefined as void;
      if (share.overall) {
        try {
          all = await share.overall.acquire('all', Math.max(1, until - Date.now()), signal);
        } catch (err) {
          mine();
          if (signal.aborted) throw aborted();
          throw new ConnectionShareTimeout(
            `The tenants' requests held all ${share.overall.perTenant} database connections this node gives them for ${share.waitMs} ms; retry later`,
            { cause: err },
          );
        }
      }
      leave = () => {
        all();
        mine();
      };
    }
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      leave();
      throw err;
    }
    active.add(client);
    const release = client.release.bind(client);
    client.release = (err?: Error | boolean) => {
      active.delete(client);
      client.release = release;
      leave();
      return release(err);
    };
    return client;
  };
  const view = {
    connect,
    async query(...args: unknown[]) {
      const client = await connect();
      try {
        return await (client.query as (...a: unknown[]) => Promise<unknown>)(...args);
      } finally {
        client.release();
      }
    },
  };
  // Everything else (totalCount, end, on …) is the pool's own.
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'connect' || prop === 'query') return view[prop];
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}

/** What a transaction says of itself at its start, in the BEGIN's round trip: `OWN_STEP` (src/engine/executor.ts). */
export type TransactionMark = typeof OWN_STEP;
/**
 * A step run by the instance's own workflow: the outbox queues no word of what the workflow reads from the
 * step's result (migrations 020 and 021 say which changes still queue one).
 */
export const OWN_STEP = 'own-step';

/** A COMMIT that Postgres answered with ROLLBACK: a statement of the transaction had failed unseen. */
export class RolledBackError extends Error {
  override name = 'RolledBackError';
}

/**
 * Runs `fn` in one transaction on one client: COMMIT on success, ROLLBACK on any throw, and the client
 * always goes back to the pool. `mark`: the transaction is a step of the instance's own workflow.
 * A COMMIT that rolled back (Postgres answers a COMMIT of a failed transaction with ROLLBACK, not an error)
 * throws, and a client whose ROLLBACK failed (a cancel that reached it, a broken connection) is discarded,
 * never handed to the next caller inside a failed transaction.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
  mark?: TransactionMark,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    // One round trip: a simple query of two statements, the second a constant.
    await client.query(mark === OWN_STEP ? `BEGIN; SELECT set_config('wfa.outbox', 'own-step', true)` : 'BEGIN');
    const result = await fn(client);
    // What the caller asks of its commits (./commit-scope.ts: a request's audit entry); a workflow's own step
    // is never a request.
    if (mark !== OWN_STEP) await commitScope.getStore()?.beforeCommit(client);
    const commit = await client.query('COMMIT');
    if (commit.command !== 'COMMIT') throw new RolledBackError(`the transaction ended with ${commit.command}`);
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollback: Error) => {
      broken = rollback;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
