/**
 * Equal as JSON. Alterations run this for every part of every instance in a batch, so it is cheap where
 * it can be: the same value or reference (an altered state shares what it did not change with the state as
 * read), primitives directly, arrays element by element; other objects as JSON text.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  return !Array.isArray(b) && JSON.stringify(a) === JSON.stringify(b);
}
