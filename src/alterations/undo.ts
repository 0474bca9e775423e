import { copyState } from './apply.js';
import { sameJson } from '../vocabulary/json.js';
import type {
  Bookmark,
  Incident,
  AlterableState,
  InstanceStatus,
  InstanceSubStatus,
} from '../engine/instance-state.js';

/**
 * The parts of an instance a user sees and an alteration may change, each with a JSON pointer: what a
 * preview lists as changes and what a job's before-image (its `undo`) records so a revert can restore it.
 */
interface Part {
  path: string;
  get(s: AlterableState): unknown;
  set(s: AlterableState, value: unknown): void;
  /** Equal in both states (when cheaper than comparing `get`'s values). */
  equal?(a: AlterableState, b: AlterableState): boolean;
}

const sameTime = (a: Date | null, b: Date | null) =>
  a === b || (a !== null && b !== null && a.getTime() === b.getTime());

const PARTS: Part[] = [
  { path: '/status', get: (s) => s.status, set: (s, v) => (s.status = v as InstanceStatus) },
  { path: '/subStatus', get: (s) => s.subStatus, set: (s, v) => (s.subStatus = v as InstanceSubStatus) },
  { path: '/definitionVersion', get: (s) => s.version, set: (s, v) => (s.version = v as number) },
  {
    path: '/definitionVersionId',
    get: (s) => s.definitionVersionId,
    set: (s, v) => (s.definitionVersionId = v as string),
  },
  { path: '/scheduledActivities', get: (s) => s.scheduled, set: (s, v) => (s.scheduled = v as string[]) },
  { path: '/bookmarks', get: (s) => s.bookmarks, set: (s, v) => (s.bookmarks = v as Bookmark[]) },
  { path: '/incidents', get: (s) => s.incidents, set: (s, v) => (s.incidents = v as Incident[]) },
  {
    path: '/finishedAt',
    get: (s) => s.finishedAt?.toISOString() ?? null,
    set: (s, v) => (s.finishedAt = v === null ? null : new Date(v as string)),
    equal: (a, b) => sameTime(a.finishedAt, b.finishedAt),
  },
];
const UPDATED_AT: Part = {
  path: '/updatedAt',
  get: (s) => s.updatedAt.toISOString(),
  set: (s, v) => (s.updatedAt = new Date(v as string)),
  equal: (a, b) => sameTime(a.updatedAt, b.updatedAt),
};
const IMAGE_PARTS = [...PARTS, UPDATED_AT];
const PART_BY_PATH = new Map(IMAGE_PARTS.map((p) => [p.path, p]));

const VARIABLES = '/variables/';
const escapeKey = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');
/** The pointer of a variable in a before-image (and a preview's changes). */
export const variablePath = (key: string) => `${VARIABLES}${escapeKey(key)}`;
const unescapeKey = (token: string) => token.replaceAll('~1', '/').replaceAll('~0', '~');

/** One changed part, as the preview shows it (an absent variable reads as null). */
export interface Change {
  path: string;
  before: unknown;
  after: unknown;
}

/**
 * A job's before-image: the changed parts only, `[pointer, value before]`, or `[pointer]` for a variable
 * the instance did not hold. Small (a ModifyVariable job records two entries) and enough to restore.
 */
export type UndoImage = ([string] | [string, unknown])[];

function variableKeys(before: AlterableState, after: AlterableState): string[] {
  return [...new Set([...Object.keys(before.variables), ...Object.keys(after.variables)])].sort();
}

/** The differences a user would see on the instance, as JSON pointers with the values before and after. */
export function changesBetween(before: AlterableState, after: AlterableState): Change[] {
  const changes: Change[] = [];
  const field = (path: string, a: unknown, b: unknown) => {
    if (!sameJson(a, b)) changes.push({ path, before: a ?? null, after: b ?? null });
  };
  for (const part of PARTS.slice(0, 4)) field(part.path, part.get(before), part.get(after));
  for (const key of variableKeys(before, after)) {
    field(variablePath(key), before.variables[key], after.variables[key]);
  }
  for (const part of PARTS.slice(4)) field(part.path, part.get(before), part.get(after));
  return changes;
}

/** What restores `after` to `before`: every changed part (and updatedAt) with its value before. */
export function undoImage(before: AlterableState, after: AlterableState): UndoImage {
  const image: UndoImage = [];
  for (const part of IMAGE_PARTS) {
    if (part.equal ? !part.equal(before, after) : !sameJson(part.get(before), part.get(after)))
      image.push([part.path, part.get(before)]);
  }
  // The variables that differ (held by one side only, or with another value), in key order.
  const keys: string[] = [];
  for (const key of Object.keys(after.variables)) {
    if (!Object.hasOwn(before.variables, key) || !sameJson(before.variables[key], after.variables[key])) keys.push(key);
  }
  for (const key of Object.keys(before.variables)) if (!Object.hasOwn(after.variables, key)) keys.push(key);
  for (const key of keys.sort()) {
    const path = variablePath(key);
    image.push(Object.hasOwn(before.variables, key) ? [path, before.variables[key]] : [path]);
  }
  return image;
}

/** The instance with the parts of a before-image put back (a copy; `current` is left as it is). */
export function restore(current: AlterableState, image: UndoImage): AlterableState {
  const s = copyState(current);
  for (const [path, ...value] of image) {
    if (path.startsWith(VARIABLES)) {
      const key = unescapeKey(path.slice(VARIABLES.length));
      if (value.length === 0) delete s.variables[key];
      else s.variables[key] = value[0];
      continue;
    }
    const part = PART_BY_PATH.get(path);
    if (!part) throw new Error(`A before-image names an unknown part ${path}`);
    part.set(s, value[0]);
  }
  return s;
}
