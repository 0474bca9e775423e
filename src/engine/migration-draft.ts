import type { Queryable } from '../db/pool.js';
import { NotFoundError } from '../errors.js';
import type { ActivityNode } from './definition-schema.js';
import { type DefinitionVersion, findDefinition } from './definitions.js';

export interface DraftMapping {
  source: string;
  target: string;
  reason: 'sameId' | 'sameTypeAndName';
}

export interface MigrationDraft {
  definitionId: string;
  from: number;
  to: number;
  mappings: DraftMapping[];
  unmapped: { activityId: string; type: string; name: string | null }[];
}

/**
 * A first draft of a Migrate's `activityMappings` from one version to another (contract section 10), for a
 * person to edit: an id both versions have maps to itself; an id the target lacks maps to the one activity of
 * the target with the same type and name that nothing else maps to (an activity without a name is matched by
 * id only: a type alone says too little); the rest is unmapped. Linear in the activities of both versions.
 */
export function migrationDraft(from: DefinitionVersion, to: DefinitionVersion): MigrationDraft {
  const targetIds = new Set(to.root.activities.map((a) => a.id));
  const key = (a: ActivityNode) => `${a.type}\u0000${a.name}`;
  // Target activities nothing maps to by id, by type and name.
  const free = new Map<string, string[]>();
  const sourceIds = new Set(from.root.activities.map((a) => a.id));
  for (const a of to.root.activities) {
    if (sourceIds.has(a.id) || !a.name) continue;
    const list = free.get(key(a));
    if (list) list.push(a.id);
    else free.set(key(a), [a.id]);
  }
  // Sources looking for each key: a target two sources could take goes to neither.
  const seeking = new Map<string, number>();
  for (const a of from.root.activities) {
    if (!targetIds.has(a.id) && a.name) seeking.set(key(a), (seeking.get(key(a)) ?? 0) + 1);
  }
  const mappings: DraftMapping[] = [];
  const unmapped: MigrationDraft['unmapped'] = [];
  const seen = new Set<string>();
  for (const a of from.root.activities) {
    if (seen.has(a.id)) continue;
    seen.add(a.id);
    if (targetIds.has(a.id)) {
      mappings.push({ source: a.id, target: a.id, reason: 'sameId' });
      continue;
    }
    const candidates = a.name ? free.get(key(a)) : undefined;
    if (candidates?.length === 1 && seeking.get(key(a)) === 1) {
      mappings.push({ source: a.id, target: candidates[0]!, reason: 'sameTypeAndName' });
    } else {
      unmapped.push({ activityId: a.id, type: a.type, name: a.name ?? null });
    }
  }
  return { definitionId: from.definitionId, from: from.version, to: to.version, mappings, unmapped };
}

/**
 * The draft for a definition of the tenant between two of its versions (`GET
 * /workflow-definitions/{definitionId}/migration-draft`, and the console's Migrate row): 404 for an unknown
 * definition or version.
 */
export async function loadMigrationDraft(
  db: Queryable,
  tenantKey: string,
  definitionId: string,
  from: number,
  to: number,
): Promise<MigrationDraft> {
  // One after the other: a request holds at most one connection at a time (its tenant's share).
  const source = await findDefinition(db, tenantKey, definitionId, from);
  if (!source) throw new NotFoundError(`Workflow definition ${definitionId} version ${from} not found`);
  const target = await findDefinition(db, tenantKey, definitionId, to);
  if (!target) throw new NotFoundError(`Workflow definition ${definitionId} version ${to} not found`);
  return migrationDraft(source, target);
}
