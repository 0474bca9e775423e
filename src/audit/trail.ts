import { createHash } from 'node:crypto';
import { tenantOut } from '../auth/principal.js';
import { type Queryable, withTransaction } from '../db/pool.js';
import type pg from 'pg';
import { decodePageCursor, encodePageCursor } from '../vocabulary/page-cursor.js';
import type { AuditActor } from './scope.js';

/**
 * The audit trail's one home: the only SQL on `audit_entries` and `audit_heads` (migration 033). Each tenant's
 * entries form a hash chain: an entry's `hash` is SHA-256 over its `prevHash` and its canonical JSON, and its
 * `seq` follows the previous one by one. An append locks its tenant's head row until its transaction commits,
 * so writers on several nodes queue there: the chain never forks and never skips a seq.
 */

/** The `prevHash` of a tenant's first entry. */
export const GENESIS_HASH = '0'.repeat(64);

export interface AuditEntryInput {
  tenantKey: string;
  actor: AuditActor;
  action: string;
  target: { kind: string | null; id: string | null };
  outcome: number;
  traceId: string | null;
  address: string | null;
  detail: Record<string, unknown>;
}

/** An entry as stored and read: the input's fields, its place in the chain, its time, and its hashes. */
export type AuditEntry = Omit<AuditEntryInput, 'tenantKey'> & {
  seq: number;
  at: string;
  tenantId: string | null;
  prevHash: string;
  hash: string;
};

/** JSON with every object's keys in order: the same entry always hashes the same, wherever it was read. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

/** The hash of an entry: SHA-256 over its `prevHash` and its canonical JSON (everything but the two hashes). */
export function entryHash(e: Omit<AuditEntry, 'hash'>): string {
  const { prevHash, ...entry } = e;
  return createHash('sha256').update(prevHash).update('\n').update(canonical(entry)).digest('hex');
}

/**
 * The canonical JSON of an entry around its seq: the text before the seq's digits and the text after (its keys
 * are in order, so `"seq":` is the top-level key's last occurrence: `detail` and `outcome` come before it, and
 * the keys after it hold no object with a `seq`). Postgres puts the seq it takes between them and hashes it.
 */
function aroundSeq(e: Omit<AuditEntry, 'hash' | 'prevHash' | 'seq'>): [string, string] {
  const text = canonical({ ...e, seq: 0 });
  const at = text.lastIndexOf('"seq":0');
  return [text.slice(0, at + '"seq":'.length), text.slice(at + '"seq":0'.length)];
}

/**
 * Appends an entry to its tenant's chain in one statement: it takes the next seq from the tenant's head row
 * (locked until the caller's transaction ends), hashes the entry with the head's hash in Postgres (sha256 over
 * the same text `entryHash` reads), and writes both. Inside the caller's transaction the change it records
 * commits with it, or neither does: call it last, just before COMMIT, so the lock is brief.
 */
export async function appendAuditEntry(db: Queryable, input: AuditEntryInput): Promise<void> {
  const { tenantKey, ...rest } = input;
  const at = new Date().toISOString();
  const [before, after] = aroundSeq({ at, tenantId: tenantOut(tenantKey), ...rest });
  await db.query(
    `WITH head AS (
       INSERT INTO audit_heads AS h (tenant_id, seq, hash, prev_hash)
       VALUES ($1, 1, encode(sha256(convert_to($2 || E'\n' || $3 || '1' || $4, 'UTF8')), 'hex'), $2)
       ON CONFLICT (tenant_id) DO UPDATE
         SET seq = h.seq + 1, prev_hash = h.hash,
             hash = encode(sha256(convert_to(h.hash || E'\n' || $3 || (h.seq + 1)::text || $4, 'UTF8')), 'hex')
       RETURNING seq, hash, prev_hash
     )
     INSERT INTO audit_entries (tenant_id, seq, at, actor_kind, actor_id, actor_name, action, target_kind, target_id,
                                outcome, trace_id, address, detail, prev_hash, hash)
     SELECT $1, head.seq, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, head.prev_hash, head.hash FROM head`,
    [
      tenantKey,
      GENESIS_HASH,
      before,
      after,
      at,
      input.actor.kind,
      input.actor.id,
      input.actor.name,
      input.action,
      input.target.kind,
      input.target.id,
      input.outcome,
      input.traceId,
      input.address,
      JSON.stringify(input.detail),
    ],
  );
}

interface EntryRow {
  tenant_id: string;
  seq: string;
  at: Date;
  actor_kind: AuditActor['kind'];
  actor_id: string | null;
  actor_name: string | null;
  action: string;
  target_kind: string | null;
  target_id: string | null;
  outcome: number;
  trace_id: string | null;
  address: string | null;
  detail: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

const entryOf = (r: EntryRow): AuditEntry => ({
  seq: Number(r.seq),
  at: r.at.toISOString(),
  tenantId: tenantOut(r.tenant_id),
  actor: { kind: r.actor_kind, id: r.actor_id, name: r.actor_name },
  action: r.action,
  target: { kind: r.target_kind, id: r.target_id },
  outcome: r.outcome,
  traceId: r.trace_id,
  address: r.address,
  detail: r.detail,
  prevHash: r.prev_hash,
  hash: r.hash,
});

export interface AuditQuery {
  /** An actor's id or name. */
  actor?: string | undefined;
  /** An action, or a family of them: `plan.*`. */
  action?: string | undefined;
  targetId?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  after?: string | undefined;
  limit: number;
}

const decodeCursor = (cursor: string) =>
  decodePageCursor(cursor, 'au', (p): p is [number] => p.length === 1 && Number.isSafeInteger(p[0]))[0];

/** A page of a tenant's entries, newest first, with the cursor of the next page (null at the end). */
export async function listAuditEntries(
  db: Queryable,
  tenantKey: string,
  q: AuditQuery,
): Promise<{ items: AuditEntry[]; nextCursor: string | null }> {
  const params: unknown[] = [tenantKey, q.limit + 1];
  const where = ['tenant_id = $1'];
  const param = (v: unknown) => `$${params.push(v)}`;
  if (q.actor !== undefined) where.push(`(actor_id = ${param(q.actor)} OR actor_name = $${params.length})`);
  if (q.action !== undefined) {
    if (q.action.endsWith('.*'))
      where.push(`action LIKE ${param(`${q.action.slice(0, -1).replace(/[\\%_]/g, '\\$&')}%`)}`);
    else where.push(`action = ${param(q.action)}`);
  }
  if (q.targetId !== undefined) where.push(`target_id = ${param(q.targetId)}`);
  if (q.from !== undefined) where.push(`at >= ${param(q.from)}`);
  if (q.to !== undefined) where.push(`at < ${param(q.to)}`);
  if (q.after !== undefined) where.push(`seq < ${param(decodeCursor(q.after))}`);
  const { rows } = await db.query<EntryRow>(
    `SELECT * FROM audit_entries WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $2`,
    params,
  );
  const page = rows.slice(0, q.limit).map(entryOf);
  return {
    items: page,
    nextCursor: rows.length > q.limit ? encodePageCursor('au', [page[page.length - 1]!.seq]) : null,
  };
}

/** Every entry of a selection, newest first, a page of `pageSize` at a time (an export holds one page). */
export async function* auditPages(
  db: Queryable,
  tenantKey: string,
  q: Omit<AuditQuery, 'after' | 'limit'>,
  pageSize = 1000,
): AsyncGenerator<AuditEntry[]> {
  let after: string | undefined;
  for (;;) {
    const page = await listAuditEntries(db, tenantKey, { ...q, after, limit: pageSize });
    if (page.items.length) yield page.items;
    if (!page.nextCursor) return;
    after = page.nextCursor;
  }
}

/** An export's lines: one entry a line. */
export const auditLines = (entries: readonly AuditEntry[]) => entries.map((e) => `${JSON.stringify(e)}\n`).join('');

/** Entries read per statement when the chain is checked. */
const VERIFY_PAGE = 1000;

/**
 * Recomputes a tenant's chain from its oldest kept entry (whose `prevHash` is taken as given: older entries may
 * have been purged): every hash, every link, every seq one after the other, and the head at the last entry.
 * `firstBrokenSeq` is the first entry that fails (or the first missing one), null when the chain holds.
 */
export async function verifyAuditChain(
  db: Queryable,
  tenantKey: string,
): Promise<{ ok: boolean; checked: number; firstBrokenSeq: number | null }> {
  let checked = 0;
  let last: AuditEntry | undefined;
  for (;;) {
    const { rows } = await db.query<EntryRow>(
      'SELECT * FROM audit_entries WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
      [tenantKey, last?.seq ?? 0, VERIFY_PAGE],
    );
    for (const row of rows) {
      const entry = entryOf(row);
      const { hash, ...unhashed } = entry;
      const linked = last === undefined || (entry.seq === last.seq + 1 && entry.prevHash === last.hash);
      if (!linked) return { ok: false, checked, firstBrokenSeq: last!.seq + 1 };
      if (entryHash(unhashed) !== hash) return { ok: false, checked, firstBrokenSeq: entry.seq };
      checked++;
      last = entry;
    }
    if (rows.length < VERIFY_PAGE) break;
  }
  const { rows: heads } = await db.query<{ seq: string; hash: string }>(
    'SELECT seq, hash FROM audit_heads WHERE tenant_id = $1',
    [tenantKey],
  );
  const head = heads[0];
  // Entries cut from the end (the head is further on) break the chain where they are missing.
  if (head && last && Number(head.seq) !== last.seq) return { ok: false, checked, firstBrokenSeq: last.seq + 1 };
  if (head && last && head.hash !== last.hash) return { ok: false, checked, firstBrokenSeq: last.seq };
  return { ok: true, checked, firstBrokenSeq: null };
}

/**
 * The retention purge: removes up to `batch` of the entries past `days`, oldest first in each tenant's chain, and
 * never one newer than a kept one (each tenant's chain loses a prefix: it verifies from its oldest kept entry). The
 * one DELETE the trail's trigger lets through (`wfa.audit_purge`, in this transaction only). Returns how many.
 */
export async function purgeAuditEntries(pool: pg.Pool, days: number, batch: number): Promise<number> {
  return withTransaction(pool, async (client) => {
    await client.query("SELECT set_config('wfa.audit_purge', 'on', true)");
    const { rowCount } = await client.query(
      `WITH bound AS (
         SELECT tenant_id, max(seq) AS upto FROM audit_entries
          WHERE at < now() - make_interval(days => $1) GROUP BY tenant_id
       ), doomed AS (
         SELECT a.tenant_id, a.seq FROM audit_entries a JOIN bound b ON b.tenant_id = a.tenant_id AND a.seq <= b.upto
          ORDER BY a.tenant_id, a.seq LIMIT $2
       )
       DELETE FROM audit_entries e USING doomed d WHERE e.tenant_id = d.tenant_id AND e.seq = d.seq`,
      [days, batch],
    );
    return rowCount ?? 0;
  });
}
