import { z } from '@hono/zod-openapi';
import type { DefinitionVersion } from '../../engine/definitions.js';
import { findActivity, nodeIdOf } from '../../engine/flowchart.js';
import type { Bookmark } from '../../engine/instance-state.js';
import { convertValue, isVariableType } from '../../engine/values.js';
import { Int32 } from '../../vocabulary/input.js';
import { currentDefinition, defineAlterationType, Identifier, versionKey } from './spec.js';

const ActivityMapping = z
  .strictObject({
    source: Identifier.openapi({ description: 'An activity id of the version the instance runs' }),
    target: Identifier.openapi({ description: 'The activity id of the target version it becomes' }),
  })
  .openapi('ActivityMapping');

/**
 * Moves the instance to another version of its definition. Every activity it waits in (a bookmark), has
 * scheduled or has a call out for is carried to the target version: to the mapping's `target` where its id is
 * a `source` (section 10), else to the same id; where that id does not exist in the target version the
 * alteration fails and the instance is left as it was, as it is where a mapping names a target of another
 * type (`otherType`). A waiting activity keeps the event it waits on, and
 * its Running record moves with it (the journal keeps the old ids). An activity whose outbound call is out
 * keeps its id: its outcome comes back to that id.
 */
export const migrate = defineAlterationType({
  type: 'Migrate',
  schema: z.strictObject({
    type: z.literal('Migrate'),
    targetVersion: Int32.min(1),
    activityMappings: z
      .array(ActivityMapping)
      .max(1000)
      .superRefine((mappings, ctx) => {
        const seen = new Set<string>();
        mappings.forEach((m, i) => {
          if (seen.has(m.source))
            ctx.addIssue({ code: 'custom', path: [i, 'source'], message: `Activity ${m.source} is mapped twice` });
          seen.add(m.source);
        });
      })
      .nullish()
      .openapi({
        description:
          'Where each activity the instance waits in, has scheduled or runs goes in the target version (by id); an activity not named keeps its id',
      }),
  }),
  synopsis: 'Migrate {targetVersion, activityMappings?}',
  definitionVersions: (a) => [a.targetVersion],
  apply(s, a, defs) {
    const target = defs.byVersion.get(versionKey(s.tenantKey, s.definitionId, a.targetVersion));
    if (!target) return `Workflow definition with ID ${s.definitionId} and version ${a.targetVersion} not found`;
    const moves = mappingsOf(a.activityMappings);
    const to = (id: string) => moves.get(id) ?? id;
    const call = (s.callsInFlight ?? []).find((id) => to(id) !== id);
    if (call !== undefined)
      return `Activity ${call} has an outbound call out: it keeps its id until the call's outcome is in`;
    // Without mappings the bookmarks are checked once per list and target: a job of many Migrates over an
    // instance waiting on thousands of bookmarks checks them once.
    const missing =
      (moves.size === 0
        ? missingBookmark(s.bookmarks, target)
        : s.bookmarks.map((b) => to(b.activityId)).find((id) => !findActivity(target.root, id))) ??
      [...s.scheduled.map(to), ...(s.callsInFlight ?? [])].find((id) => !findActivity(target.root, id));
    if (missing !== undefined) return `Activity ${missing} does not exist in version ${a.targetVersion}`;
    if (moves.size > 0) {
      const refused = otherType(s.bookmarks, s.scheduled, to, currentDefinition(s, defs), target);
      if (refused) return refused;
      // Chained moves (two Migrates in one job) compose: the record to move is the one the instance had.
      const moved = [...(s.movedActivities ?? [])];
      for (const b of s.bookmarks) {
        const goesTo = to(b.activityId);
        if (goesTo === b.activityId) continue;
        const node = findActivity(target.root, goesTo)!;
        const entry = {
          from: b.activityId,
          to: goesTo,
          nodeId: nodeIdOf(target.root, node),
          activityType: node.type,
          name: node.name ?? null,
        };
        const earlier = moved.findIndex((m) => m.to === b.activityId);
        if (earlier >= 0) moved[earlier] = { ...entry, from: moved[earlier]!.from };
        else moved.push(entry);
      }
      // Replaced, never changed in place (AlterationTypeSpec.apply).
      s.bookmarks = s.bookmarks.map((b) =>
        to(b.activityId) === b.activityId ? b : { ...b, activityId: to(b.activityId) },
      );
      s.scheduled = s.scheduled.map(to);
      if (moved.length > 0) s.movedActivities = moved.filter((m) => m.from !== m.to);
    }
    s.definitionVersionId = target.id;
    s.version = target.version;
    // Variables the target declares and the instance does not hold yet start at their defaults.
    for (const v of target.variables) {
      if (!(v.id in s.variables) && v.value !== undefined && isVariableType(v.typeName)) {
        const c = convertValue(v.typeName, v.value);
        s.variables[v.id] = c.ok ? c.value : null;
      }
    }
    return undefined;
  },
  summary: (a) =>
    `Migrate to version ${a.targetVersion}${a.activityMappings?.length ? ` (${a.activityMappings.length} activities mapped)` : ''}`,
});

/**
 * A mapping carries an activity only to one of its own type: a bookmark moved onto an activity that does not
 * wait (a SetVariable, say) would complete it at the event without running it, and a scheduled step would run
 * as another kind of step. The message names both; undefined when every moved activity keeps its type.
 */
function otherType(
  bookmarks: readonly Bookmark[],
  scheduled: readonly string[],
  to: (id: string) => string,
  current: DefinitionVersion,
  target: DefinitionVersion,
): string | undefined {
  for (const id of [...bookmarks.map((b) => b.activityId), ...scheduled]) {
    const goesTo = to(id);
    if (goesTo === id) continue;
    const from = findActivity(current.root, id)?.type;
    const into = findActivity(target.root, goesTo)?.type;
    if (from !== undefined && into !== undefined && from !== into)
      return `Activity ${id} (${from}) cannot be carried to ${goesTo} (${into}) in version ${target.version}: an activity is carried only to one of its own type`;
  }
  return undefined;
}

/** An alteration's mappings as a map, made once per alteration (the same object is applied to every job). */
const mappingMaps = new WeakMap<object, Map<string, string>>();
const NO_MAPPINGS = new Map<string, string>();
function mappingsOf(mappings: readonly { source: string; target: string }[] | null | undefined): Map<string, string> {
  if (!mappings || mappings.length === 0) return NO_MAPPINGS;
  let map = mappingMaps.get(mappings);
  if (!map) mappingMaps.set(mappings, (map = new Map(mappings.map((m) => [m.source, m.target]))));
  return map;
}

/**
 * The first bookmark whose activity the target version lacks, remembered per bookmark list and target: a
 * state's `bookmarks` is replaced, never changed in place (`AlterationTypeSpec.apply`), so the same list gives
 * the same answer.
 */
const bookmarkChecks = new WeakMap<readonly Bookmark[], WeakMap<DefinitionVersion, string | null>>();
function missingBookmark(bookmarks: readonly Bookmark[], target: DefinitionVersion): string | undefined {
  let byTarget = bookmarkChecks.get(bookmarks);
  if (!byTarget) bookmarkChecks.set(bookmarks, (byTarget = new WeakMap()));
  let missing = byTarget.get(target);
  if (missing === undefined) {
    missing = bookmarks.find((b) => !findActivity(target.root, b.activityId))?.activityId ?? null;
    byTarget.set(target, missing);
  }
  return missing ?? undefined;
}
