import { noteAudit } from '../audit/scope.js';
import type pg from 'pg';
import { prepared, type Queryable, withTransaction } from '../db/pool.js';
import {
  ConflictError,
  type FieldError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
  zodFieldErrors,
} from '../errors.js';
import { newId } from '../ids.js';
import { type ConfigCipher, DecryptionError } from './cipher.js';
import { CONNECTION_TYPES, findConnectionType } from './types.js';
import { isUniqueViolation } from '../db/errors.js';

/** The tenant of connections every tenant sees. */
export const AGNOSTIC_TENANT = '*';

export interface ConnectionRequest {
  name: string;
  description?: string | null | undefined;
  connectionType: string;
  connectionConfiguration: Record<string, unknown>;
}

export interface Connection {
  id: string;
  tenantId: string | null;
  name: string;
  description: string | null;
  connectionType: string;
  connectionConfiguration: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

interface Row {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  connection_type: string;
  configuration: Record<string, unknown> | null;
  configuration_encrypted: Buffer | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, tenant_id, name, description, connection_type, configuration, configuration_encrypted, created_at, updated_at';

/** The associated data bound into a row's ciphertext. */
const aad = (id: string, tenantKey: string) => `connection:${tenantKey}:${id}`;

function fromRow(r: Row, cipher: ConfigCipher): Connection {
  const configuration =
    r.configuration_encrypted !== null
      ? (JSON.parse(cipher.decrypt(r.configuration_encrypted, aad(r.id, r.tenant_id))) as Record<string, unknown>)
      : r.configuration!;
  return {
    id: r.id,
    tenantId: r.tenant_id === '' ? null : r.tenant_id,
    name: r.name,
    description: r.description,
    connectionType: r.connection_type,
    connectionConfiguration: configuration,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

/**
 * Validates a request: a non-blank name, a registered type, and a configuration its schema accepts
 * (every problem named by its JSON pointer). Returns the configuration as the schema reads it (defaults
 * filled in), which is what is stored and what activities receive.
 */
export function validateConnection(req: ConnectionRequest): { name: string; configuration: Record<string, unknown> } {
  const errors: FieldError[] = [];
  const name = req.name.trim();
  if (name === '') errors.push({ path: '/name', message: 'The name must not be blank' });
  const type = findConnectionType(req.connectionType);
  let configuration: Record<string, unknown> = {};
  if (!type) {
    errors.push({
      path: '/connectionType',
      message: `Unknown connection type "${req.connectionType}"; registered: ${CONNECTION_TYPES.map((t) => t.type).join(', ')}`,
    });
  } else {
    const parsed = type.schema.safeParse(req.connectionConfiguration);
    if (parsed.success) configuration = parsed.data as Record<string, unknown>;
    if (parsed.error) errors.push(...zodFieldErrors(parsed.error, ['connectionConfiguration'], `for ${type.type}`));
  }
  if (errors.length) throw new ValidationError('The connection is not valid', errors);
  return { name, configuration };
}

function storedConfiguration(
  cipher: ConfigCipher,
  id: string,
  tenantKey: string,
  configuration: Record<string, unknown>,
) {
  const json = JSON.stringify(configuration);
  return cipher.enabled
    ? { plain: null, encrypted: cipher.encrypt(json, aad(id, tenantKey)) }
    : { plain: json, encrypted: null };
}

const isNameClash = (err: unknown) =>
  isUniqueViolation(err) && (err as { constraint?: string }).constraint === 'connection_configurations_name_unique';

const clash = (name: string) => new ConflictError(`A connection named "${name}" already exists`);

export async function createConnection(
  db: Queryable,
  cipher: ConfigCipher,
  tenantKey: string,
  req: ConnectionRequest,
  now = new Date(),
): Promise<Connection> {
  const { name, configuration } = validateConnection(req);
  const id = newId();
  noteAudit({ targetId: id });
  const stored = storedConfiguration(cipher, id, tenantKey, configuration);
  try {
    const { rows } = await db.query<Row>(
      `INSERT INTO connection_configurations
         (id, tenant_id, name, description, connection_type, configuration, configuration_encrypted, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $8) RETURNING ${COLUMNS}`,
      [id, tenantKey, name, req.description ?? null, req.connectionType, stored.plain, stored.encrypted, now],
    );
    return fromRow(rows[0]!, cipher);
  } catch (err) {
    if (isNameClash(err)) throw clash(name);
    throw err;
  }
}

/** A connection the tenant can see: its own, or a tenant-agnostic one. */
async function visibleRow(db: Queryable, tenantKey: string, id: string): Promise<Row> {
  const { rows } = await db.query<Row>(
    `SELECT ${COLUMNS} FROM connection_configurations WHERE id = $1 AND tenant_id IN ($2, '${AGNOSTIC_TENANT}')`,
    [id, tenantKey],
  );
  if (!rows[0]) throw new NotFoundError(`Connection ${id} not found`);
  return rows[0];
}

export async function getConnection(
  db: Queryable,
  cipher: ConfigCipher,
  tenantKey: string,
  id: string,
): Promise<Connection> {
  return fromRow(await visibleRow(db, tenantKey, id), cipher);
}

/** Only the tenant that owns a connection changes it; a tenant-agnostic one only a principal of tenant `*`. */
async function ownedRow(db: Queryable, tenantKey: string, id: string): Promise<Row> {
  const row = await visibleRow(db, tenantKey, id);
  if (row.tenant_id !== tenantKey) {
    throw new ForbiddenError(
      `Connection ${id} is shared by every tenant (tenant "*"); only a principal of tenant "*" may change it`,
    );
  }
  return row;
}

export async function updateConnection(
  db: Queryable,
  cipher: ConfigCipher,
  tenantKey: string,
  id: string,
  req: ConnectionRequest,
  now = new Date(),
): Promise<Connection> {
  const { name, configuration } = validateConnection(req);
  await ownedRow(db, tenantKey, id);
  const stored = storedConfiguration(cipher, id, tenantKey, configuration);
  try {
    const { rows } = await db.query<Row>(
      `UPDATE connection_configurations SET name = $3, description = $4, connection_type = $5, configuration = $6::jsonb,
              configuration_encrypted = $7, updated_at = $8
        WHERE id = $1 AND tenant_id = $2 RETURNING ${COLUMNS}`,
      [id, tenantKey, name, req.description ?? null, req.connectionType, stored.plain, stored.encrypted, now],
    );
    if (!rows[0]) throw new NotFoundError(`Connection ${id} not found`);
    return fromRow(rows[0], cipher);
  } catch (err) {
    if (isNameClash(err)) throw clash(name);
    throw err;
  }
}

export async function deleteConnection(db: Queryable, tenantKey: string, id: string): Promise<void> {
  await ownedRow(db, tenantKey, id);
  await db.query('DELETE FROM connection_configurations WHERE id = $1 AND tenant_id = $2', [id, tenantKey]);
}

export async function listConnections(
  db: Queryable,
  cipher: ConfigCipher,
  tenantKey: string,
  opts: { connectionType?: string | undefined; skip: number; take: number },
): Promise<{ items: Connection[]; totalCount: number }> {
  const params = [tenantKey, opts.connectionType ?? null];
  const where = `tenant_id IN ($1, '${AGNOSTIC_TENANT}') AND ($2::text IS NULL OR connection_type = $2)`;
  // One after the other: an API request holds at most one connection at a time (its tenant's share).
  const page = await db.query<Row>(
    `SELECT ${COLUMNS} FROM connection_configurations WHERE ${where} ORDER BY name, tenant_id, id OFFSET $3 LIMIT $4`,
    [...params, opts.skip, opts.take],
  );
  const count = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM connection_configurations WHERE ${where}`,
    params,
  );
  return { items: page.rows.map((r) => fromRow(r, cipher)), totalCount: count.rows[0]!.n };
}

/** The names of the tenant's connections of one type (the activity input options provider). */
export async function connectionNames(db: Queryable, tenantKey: string, connectionType: string): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT DISTINCT name FROM connection_configurations WHERE tenant_id IN ($1, '${AGNOSTIC_TENANT}') AND connection_type = $2 ORDER BY name`,
    [tenantKey, connectionType],
  );
  return rows.map((r) => r.name);
}

/** The connections named `name` the tenant sees, its own first (SQL expressions of the tenant and the name). */
const byName = (tenant: string, name: string, table = 'connection_configurations') =>
  `${table}.name = ${name} AND ${table}.tenant_id IN (${tenant}, '${AGNOSTIC_TENANT}')
      ORDER BY (${table}.tenant_id = '${AGNOSTIC_TENANT}') LIMIT 1`;

/** A connection by name in the tenant; the tenant's own wins over a tenant-agnostic one of the same name. */
export async function findConnectionByName(
  db: Queryable,
  cipher: ConfigCipher,
  tenantKey: string,
  name: string,
): Promise<Connection | undefined> {
  const { rows } = await db.query<Row>(
    prepared(`SELECT ${COLUMNS} FROM connection_configurations WHERE ${byName('$1', '$2')}`, [tenantKey, name]),
  );
  return rows[0] ? fromRow(rows[0], cipher) : undefined;
}

/** A connection row as `connectionByNameSql` answers it: JSON, the ciphertext in base64. */
export interface ConnectionJson extends Omit<Row, 'configuration_encrypted' | 'created_at' | 'updated_at'> {
  configuration_encrypted: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * `findConnectionByName` as a scalar subquery (the tenant and the name as SQL expressions), for a statement that
 * reads what else it needs in the same round trip: the connection as JSON, or NULL; `connectionFromJson` reads it.
 */
export function connectionByNameSql(tenant: string, name: string): string {
  return `(SELECT json_build_object('id', c.id, 'tenant_id', c.tenant_id, 'name', c.name, 'description', c.description,
            'connection_type', c.connection_type, 'configuration', c.configuration,
            'configuration_encrypted', encode(c.configuration_encrypted, 'base64'),
            'created_at', c.created_at, 'updated_at', c.updated_at)
       FROM connection_configurations c WHERE ${byName(tenant, name, 'c')})`;
}

/** The connection `connectionByNameSql` read (decrypted as `findConnectionByName` answers it); undefined for none. */
export function connectionFromJson(json: ConnectionJson | null, cipher: ConfigCipher): Connection | undefined {
  if (!json) return undefined;
  return fromRow(
    {
      ...json,
      configuration_encrypted:
        json.configuration_encrypted === null ? null : Buffer.from(json.configuration_encrypted, 'base64'),
      created_at: new Date(json.created_at),
      updated_at: new Date(json.updated_at),
    },
    cipher,
  );
}

/**
 * Startup check: with a key, it must decrypt what is stored; without one, nothing may be encrypted. A
 * wrong or missing key stops the service with a clear message instead of failing later per request.
 */
export async function checkEncryptionKey(pool: pg.Pool, cipher: ConfigCipher): Promise<void> {
  const { rows } = await pool.query<Pick<Row, 'id' | 'tenant_id' | 'configuration_encrypted'>>(
    'SELECT id, tenant_id, configuration_encrypted FROM connection_configurations WHERE configuration_encrypted IS NOT NULL LIMIT 1',
  );
  const sample = rows[0];
  if (!sample) return;
  if (!cipher.enabled) {
    throw new DecryptionError(
      'Stored connection configurations are encrypted, but CONNECTIONS_ENCRYPTION_KEY is not set',
    );
  }
  cipher.decrypt(sample.configuration_encrypted!, aad(sample.id, sample.tenant_id));
}

/**
 * A key rotation's second half: every configuration still encrypted with CONNECTIONS_ENCRYPTION_KEY_PREVIOUS
 * is encrypted again with CONNECTIONS_ENCRYPTION_KEY, a few hundred rows per transaction (rows locked, so two
 * nodes starting at once each re-encrypt a row at most once and never lose an update made meanwhile).
 * Returns how many rows it re-encrypted; once every node runs with the new key, the previous one can go.
 */
export async function reencryptConnections(pool: pg.Pool, cipher: ConfigCipher): Promise<number> {
  if (!cipher.enabled) return 0;
  let done = 0;
  for (let after = ''; ;) {
    const page = await withTransaction(pool, async (db) => {
      const { rows } = await db.query<Pick<Row, 'id' | 'tenant_id' | 'configuration_encrypted'>>(
        `SELECT id, tenant_id, configuration_encrypted FROM connection_configurations
          WHERE configuration_encrypted IS NOT NULL AND id > $1 ORDER BY id LIMIT 500 FOR UPDATE`,
        [after],
      );
      const stale = rows.filter((r) => cipher.stale(r.configuration_encrypted!, aad(r.id, r.tenant_id)));
      if (stale.length > 0) {
        await db.query(
          `UPDATE connection_configurations c SET configuration_encrypted = u.blob
             FROM unnest($1::text[], $2::bytea[]) AS u(id, blob) WHERE c.id = u.id`,
          [
            stale.map((r) => r.id),
            stale.map((r) => {
              const associatedData = aad(r.id, r.tenant_id);
              return cipher.encrypt(cipher.decrypt(r.configuration_encrypted!, associatedData), associatedData);
            }),
          ],
        );
      }
      return { last: rows[rows.length - 1]?.id, changed: stale.length };
    });
    done += page.changed;
    if (page.last === undefined) return done;
    after = page.last;
  }
}
