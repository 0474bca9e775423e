import { z } from '@hono/zod-openapi';
import type { DefinitionVersion } from '../../engine/definitions.js';
import { findActivity, nodeIdOf } from '../../engine/flowchart.js';
import type { Bookmark } from '../../engine/instance-state.js';
import { convertValue, isVariableType } from '../../engine/values.js';
import type { InputValue } from '../../engine/definition-schema.js';
import { evaluateInput } from '../../engine/inputs.js';
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
 * alteration fails and the instance is left as it was, as it is where that id names an activity of another
 * type (`carryProblem`), and where two of them would land on one activity. A carried wait waits on its target
 * activity's own event in the target version, and its Running record moves with it (the journal keeps the old ids). An activity whose outbound call is out
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
        // Each source once, and each target once: two waits carried onto one activity would complete it twice.
        const seen = new Set<string>();
        const targets = new Map<string, string>();
        mappings.forEach((m, i) => {
          if (seen.has(m.source))
            ctx.addIssue({ code: 'custom', path: [i, 'source'], message: `Activity ${m.source} is mapped twice` });
          seen.add(m.source);
          const first = targets.get(m.target);
          if (first !== undefined)
            ctx.addIssue({
              code: 'custom',
              path: [i, 'target'],
              message: `Activities ${first} and ${m.source} are both mapped to ${m.target}: map each target once`,
            });
          else targets.set(m.target, m.source);
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
    // Every activity carried must exist in the target, as one of its own type. Without mappings the bookmarks
    // are checked once per list, version and target: a job of many Migrates over an instance waiting on
    // thousands of bookmarks checks them once.
    const current = currentDefinition(s, defs);
    const refused =
      (moves.size === 0
        ? bookmarkProblem(s.bookmarks, current, target)
        : carryProblem(
            s.bookmarks.map((b) => b.activityId),
            to,
            current,
            target,
          )) ?? carryProblem([...s.scheduled, ...(s.callsInFlight ?? [])], to, current, target);
    if (refused !== undefined) return refused;
    if (moves.size > 0) {
      const clash = collision(s.bookmarks, s.scheduled, to);
      if (clash) return clash;
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
    // A carried wait waits on what its activity waits on in the target version (its own event), not the source's.
    s.bookmarks = withTargetEvents(s.bookmarks, target, s.variables);
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
  form: {
    fields: [
      { key: 'targetVersion', label: 'Target version', kind: 'number' },
      {
        key: 'activityMappings',
        label: 'Activity mappings',
        kind: 'mappings',
        draftTo: 'targetVersion',
        hint: 'One mapping a line, source -> target; an activity not named keeps its id.',
      },
    ],
  },
  example: { type: 'Migrate', targetVersion: 2, activityMappings: [{ source: 'wait', target: 'await-approval' }] },
});

/**
 * Why an activity cannot be carried to the target version, or undefined: its id there (`to`) does not exist,
 * or names an activity of another type. A bookmark carried onto an activity that does not wait (a SetVariable,
 * say) would complete it at the event without running it, and a scheduled step would run as another kind of
 * step; this holds for an activity that keeps its id as for a mapped one, so that two Migrates in one job
 * cannot carry a wait onto another type in two moves.
 */
function carryProblem(
  ids: readonly string[],
  to: (id: string) => string,
  current: DefinitionVersion,
  target: DefinitionVersion,
): string | undefined {
  for (const id of ids) {
    const goesTo = to(id);
    const into = findActivity(target.root, goesTo);
    if (!into) return `Activity ${goesTo} does not exist in version ${target.version}`;
    const from = findActivity(current.root, id)?.type;
    if (from !== undefined && from !== into.type)
      return `Activity ${id} (${from}) cannot be carried to ${goesTo} (${into.type}) in version ${target.version}: an activity is carried only to one of its own type`;
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
 * `carryProblem` of an instance's bookmarks without mappings, remembered per bookmark list, version and target:
 * a state's `bookmarks` is replaced, never changed in place (`AlterationTypeSpec.apply`), so the same list gives
 * the same answer.
 */
const bookmarkChecks = new WeakMap<
  readonly Bookmark[],
  WeakMap<DefinitionVersion, WeakMap<DefinitionVersion, string | null>>
>();
function bookmarkProblem(
  bookmarks: readonly Bookmark[],
  current: DefinitionVersion,
  target: DefinitionVersion,
): string | undefined {
  let byCurrent = bookmarkChecks.get(bookmarks);
  if (!byCurrent) bookmarkChecks.set(bookmarks, (byCurrent = new WeakMap()));
  let byTarget = byCurrent.get(current);
  if (!byTarget) byCurrent.set(current, (byTarget = new WeakMap()));
  let problem = byTarget.get(target);
  if (problem === undefined) {
    problem =
      carryProblem(
        bookmarks.map((b) => b.activityId),
        (id) => id,
        current,
        target,
      ) ?? null;
    byTarget.set(target, problem);
  }
  return problem ?? undefined;
}

/**
 * Why two of the instance's activities would land on one activity of the target version (one kept, one mapped
 * onto it, say), or undefined: that activity would wait twice and complete twice.
 */
function collision(
  bookmarks: readonly Bookmark[],
  scheduled: readonly string[],
  to: (id: string) => string,
): string | undefined {
  const from = new Map<string, string>();
  for (const id of new Set([...bookmarks.map((b) => b.activityId), ...scheduled])) {
    const goesTo = to(id);
    const other = from.get(goesTo);
    if (other !== undefined) return `Activities ${other} and ${id} would both be carried to ${goesTo}`;
    from.set(goesTo, id);
  }
  return undefined;
}

/**
 * The bookmarks with each one's event as its activity waits on it in the target version (its `eventName` input,
 * evaluated against the instance's variables). The same list when nothing changes, as it is for a version that
 * renamed no event (a list is replaced, never changed in place: checks are remembered per list).
 */
function withTargetEvents(
  bookmarks: readonly Bookmark[],
  target: DefinitionVersion,
  variables: Record<string, unknown>,
): Bookmark[] {
  let changed = false;
  const next = bookmarks.map((b) => {
    const node = findActivity(target.root, b.activityId);
    const input = node?.eventName as InputValue | undefined;
    if (!input) return b;
    const eventName = String(evaluateInput(input, target, variables));
    if (eventName === b.eventName) return b;
    changed = true;
    return { ...b, eventName };
  });
  return changed ? next : (bookmarks as Bookmark[]);
}
