import { noteAudit } from '../audit/scope.js';
import type pg from 'pg';
import { ValidationError } from '../errors.js';
import { newId } from '../ids.js';
import type { Queryable } from '../db/pool.js';
import { prepared, withTransaction } from '../db/pool.js';
import type { Flowchart, VariableDefinition, WorkflowDefinitionRequest } from './definition-schema.js';
import { validateDefinition } from './flowchart.js';

/** One published version of a workflow definition. Immutable once stored. */
export interface DefinitionVersion {
  id: string;
  tenantKey: string;
  definitionId: string;
  version: number;
  isLatest: boolean;
  isPublished: boolean;
  name: string | null;
  description: string | null;
  variables: VariableDefinition[];
  root: Flowchart;
  options: { usableAsActivity: boolean };
  createdAt: Date;
}

interface DefinitionRow {
  id: string;
  tenant_id: string;
  definition_id: string;
  version: number;
  is_latest: boolean;
  is_published: boolean;
  name: string | null;
  description: string | null;
  variables: VariableDefinition[];
  root: Flowchart;
  options: { usableAsActivity: boolean };
  created_at: Date;
}

const COLUMNS =
  'id, tenant_id, definition_id, version, is_latest, is_published, name, description, variables, root, options, created_at';

function fromRow(r: DefinitionRow): DefinitionVersion {
  return { ...summaryFromRow(r), tenantKey: r.tenant_id, variables: r.variables, root: r.root };
}

/** A version's row without its flowchart and variables (what a list reads), as a summary. */
function summaryFromRow(r: Omit<DefinitionRow, 'root' | 'variables'>): DefinitionSummary {
  return {
    id: r.id,
    definitionId: r.definition_id,
    version: r.version,
    isLatest: r.is_latest,
    isPublished: r.is_published,
    name: r.name,
    description: r.description,
    options: r.options,
    createdAt: r.created_at,
  };
}

/**
 * Validates and publishes the next version of a definition (1, 2, 3, … per definitionId and tenant); the
 * new version becomes the latest. Concurrent publishes of one definition take turns on an advisory lock,
 * and the unique (tenant, definition, version) constraint backs that up.
 */
export async function publishDefinition(
  pool: pg.Pool,
  tenantKey: string,
  req: WorkflowDefinitionRequest,
): Promise<DefinitionVersion> {
  const errors = validateDefinition(req);
  if (errors.length > 0) throw new ValidationError('The workflow definition is not valid', errors);
  const definitionId = req.definitionId ?? newId();
  noteAudit({ targetId: definitionId });
  return withTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `definition:${tenantKey}:${definitionId}`,
    ]);
    const { rows } = await client.query<{ version: number }>(
      `UPDATE workflow_definitions SET is_latest = false
        WHERE tenant_id = $1 AND definition_id = $2 AND is_latest
        RETURNING version`,
      [tenantKey, definitionId],
    );
    const { rows: max } = await client.query<{ v: number | null }>(
      'SELECT max(version) AS v FROM workflow_definitions WHERE tenant_id = $1 AND definition_id = $2',
      [tenantKey, definitionId],
    );
    const version = Math.max(rows[0]?.version ?? 0, max[0]?.v ?? 0) + 1;
    const inserted = await client.query<DefinitionRow>(
      `INSERT INTO workflow_definitions
         (id, tenant_id, definition_id, version, is_latest, is_published, name, description, variables, root, options, usable_as_activity)
       VALUES ($1, $2, $3, $4, true, true, $5, $6, $7::jsonb, $8::jsonb, $9::jsonb, $10)
       RETURNING ${COLUMNS}`,
      [
        newId(),
        tenantKey,
        definitionId,
        version,
        req.name ?? null,
        req.description ?? null,
        JSON.stringify(req.variables),
        JSON.stringify(req.root),
        JSON.stringify(req.options),
        req.options.usableAsActivity,
      ],
    );
    return fromRow(inserted.rows[0]!);
  });
}

/** The latest version, or the given one, of a definition in the tenant. */
export async function findDefinition(
  db: Queryable,
  tenantKey: string,
  definitionId: string,
  version?: number,
): Promise<DefinitionVersion | undefined> {
  // Two texts, not one with `$3 IS NULL OR …`: a prepared statement's generic plan could use neither the latest's
  // partial index nor the version's column, and would read every version of the definition.
  const { rows } = await db.query<DefinitionRow>(
    version === undefined
      ? prepared(
          `SELECT ${COLUMNS} FROM workflow_definitions WHERE tenant_id = $1 AND definition_id = $2 AND is_latest`,
          [tenantKey, definitionId],
        )
      : prepared(
          `SELECT ${COLUMNS} FROM workflow_definitions WHERE tenant_id = $1 AND definition_id = $2 AND version = $3`,
          [tenantKey, definitionId, version],
        ),
  );
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/**
 * Definition versions never change once stored, so a process may keep them; the cache is bounded so a
 * long-running worker does not grow without limit.
 */
export class DefinitionCache {
  private readonly entries = new Map<string, DefinitionVersion>();
  private readonly versionIds = new Map<string, string>();
  constructor(private readonly max = 1000) {}

  async byVersionId(db: Queryable, id: string): Promise<DefinitionVersion | undefined> {
    const hit = this.entries.get(id);
    if (hit) return hit;
    const { rows } = await db.query<DefinitionRow>(
      prepared(`SELECT ${COLUMNS} FROM workflow_definitions WHERE id = $1`, [id]),
    );
    if (!rows[0]) return undefined;
    const def = fromRow(rows[0]);
    this.remember(def);
    return def;
  }

  /** A given version of a definition in the tenant (a miss is not cached: it may be published later). */
  async byVersion(
    db: Queryable,
    tenantKey: string,
    definitionId: string,
    version: number,
  ): Promise<DefinitionVersion | undefined> {
    const key = `${tenantKey}\u0000${definitionId}\u0000${version}`;
    const id = this.versionIds.get(key);
    if (id !== undefined) {
      const hit = this.entries.get(id);
      if (hit) return hit;
    }
    const def = await findDefinition(db, tenantKey, definitionId, version);
    if (def) {
      this.remember(def);
      if (this.versionIds.size >= this.max) this.versionIds.delete(this.versionIds.keys().next().value!);
      this.versionIds.set(key, def.id);
    }
    return def;
  }

  private remember(def: DefinitionVersion): void {
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(def.id, def);
  }
}

/** A definition's latest version without its flowchart and variables: what a list shows. */
export type DefinitionSummary = Omit<DefinitionVersion, 'root' | 'variables' | 'tenantKey'>;

/**
 * A page of the latest version of every definition in the tenant, by definition id, after `after`, as
 * summaries: a list never reads a flowchart (each up to 1 MiB; a tenant's every flowchart in one answer
 * grew with its number of definitions), and says how many there are in all.
 */
export async function listLatestDefinitions(
  db: Queryable,
  tenantKey: string,
  opts: { after?: string | undefined; limit: number },
): Promise<{ items: DefinitionSummary[]; totalCount: number; nextDefinitionId: string | null }> {
  const { rows } = await db.query<Omit<DefinitionRow, 'root' | 'variables'>>(
    `SELECT id, tenant_id, definition_id, version, is_latest, is_published, name, description, options, created_at
       FROM workflow_definitions
      WHERE tenant_id = $1 AND is_latest AND ($2::text IS NULL OR definition_id > $2)
      ORDER BY definition_id LIMIT $3`,
    [tenantKey, opts.after ?? null, opts.limit + 1],
  );
  const { rows: counted } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM workflow_definitions WHERE tenant_id = $1 AND is_latest',
    [tenantKey],
  );
  const more = rows.length > opts.limit;
  const page = more ? rows.slice(0, opts.limit) : rows;
  return {
    items: page.map(summaryFromRow),
    totalCount: counted[0]!.n,
    nextDefinitionId: more ? page[page.length - 1]!.definition_id : null,
  };
}

/** What the activity catalog shows of a definition usable as an activity (never its flowchart). */
export interface ActivityDefinition {
  definitionId: string;
  name: string | null;
  description: string | null;
  variables: VariableDefinition[];
}

/** The latest versions usable as activities, by definition id (at most 1,000: a catalog, not an export). */
export async function listActivityDefinitions(db: Queryable, tenantKey: string): Promise<ActivityDefinition[]> {
  const { rows } = await db.query<{
    definition_id: string;
    name: string | null;
    description: string | null;
    variables: VariableDefinition[];
  }>(
    `SELECT definition_id, name, description, variables FROM workflow_definitions
      WHERE tenant_id = $1 AND is_latest AND (options->>'usableAsActivity')::boolean
      ORDER BY definition_id LIMIT 1000`,
    [tenantKey],
  );
  return rows.map((r) => ({
    definitionId: r.definition_id,
    name: r.name,
    description: r.description,
    variables: r.variables,
  }));
}
