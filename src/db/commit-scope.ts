import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';

/**
 * What the code running now asks of every transaction it commits: `beforeCommit` runs inside the transaction,
 * after its work and before its COMMIT (withTransaction in ./pool.ts). A request under the audit trail writes
 * its entry so (src/api/audit-trail.ts): the entry and the change it records commit together.
 */
export interface CommitHook {
  beforeCommit(client: pg.PoolClient): Promise<void>;
}

export const commitScope = new AsyncLocalStorage<CommitHook>();
