import { z } from '@hono/zod-openapi';
import type { DefinitionVersion } from '../../engine/definitions.js';
import { findActivity } from '../../engine/flowchart.js';
import type { Bookmark } from '../../engine/instance-state.js';
import { convertValue, isVariableType } from '../../engine/values.js';
import { Int32 } from '../../vocabulary/input.js';
import { defineAlterationType, versionKey } from './spec.js';

/**
 * Moves the instance to another version of its definition. Every activity it waits in, has scheduled or has
 * a call out for keeps its id, and must exist in the target version (a call's outcome runs what follows it
 * there): the place where activity mappings (an activity carried to another id) belong.
 */
export const migrate = defineAlterationType({
  type: 'Migrate',
  schema: z.strictObject({ type: z.literal('Migrate'), targetVersion: Int32.min(1) }),
  synopsis: 'Migrate {targetVersion}',
  definitionVersions: (a) => [a.targetVersion],
  apply(s, a, defs) {
    const target = defs.byVersion.get(versionKey(s.tenantKey, s.definitionId, a.targetVersion));
    if (!target) return `Workflow definition with ID ${s.definitionId} and version ${a.targetVersion} not found`;
    // The bookmarks are checked once per list and target: a job of many Migrates over an instance waiting on
    // thousands of bookmarks checks them once.
    const missing =
      missingBookmark(s.bookmarks, target) ??
      [...s.scheduled, ...(s.callsInFlight ?? [])].find((id) => !findActivity(target.root, id));
    if (missing !== undefined) return `Activity ${missing} does not exist in version ${a.targetVersion}`;
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
  summary: (a) => `Migrate to version ${a.targetVersion}`,
});

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
