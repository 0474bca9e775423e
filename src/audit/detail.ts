/**
 * An entry's `detail`: a small JSON of what a request changed, made from its body, that never holds a secret.
 * Fields that carry one (passwords, keys, tokens, a connection's configuration) keep their names and lose their
 * values; long strings, long lists and deep objects are cut, so an entry stays small whatever the request.
 */
export const MASKED = '[masked]';

/** Field names whose values are secrets, or may hold one. */
const SECRET =
  /password|passwd|pwd|secret|token|api[-_]?key|private[-_]?key|^key$|credential|authorization|cookie|csrf|connectionconfiguration/i;
/** The fields that name a variable whose `value` stands beside them (a ModifyVariable): a secret's name masks it. */
const NAMING = ['variableId', 'variableName'] as const;
const MAX_STRING = 200;
const MAX_ITEMS = 10;
const MAX_DEPTH = 4;
/** Past this size (as JSON) the detail names the body's fields only. */
export const MAX_DETAIL_BYTES = 4096;

/** Postgres's jsonb holds no NUL character and no lone surrogate. */
const clean = (text: string) =>
  text
    .split('\u0000')
    .join('')
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

function shrink(value: unknown, depth: number): unknown {
  if (typeof value === 'string') {
    const text = clean(value);
    return text.length > MAX_STRING ? `${text.slice(0, MAX_STRING)}…` : text;
  }
  if (value === null || typeof value !== 'object')
    return typeof value === 'number' && !Number.isFinite(value) ? null : value;
  if (depth >= MAX_DEPTH) return '…';
  if (Array.isArray(value)) {
    const items = value.slice(0, MAX_ITEMS).map((v) => shrink(v, depth + 1));
    if (value.length > MAX_ITEMS) items.push(`… ${value.length - MAX_ITEMS} more`);
    return items;
  }
  const out: Record<string, unknown> = {};
  const record = value as Record<string, unknown>;
  const namesSecret = NAMING.some((k) => typeof record[k] === 'string' && SECRET.test(record[k]));
  for (const [key, v] of Object.entries(value)) {
    if (SECRET.test(key) || (namesSecret && key === 'value')) {
      out[clean(key)] =
        v && typeof v === 'object' && !Array.isArray(v)
          ? Object.fromEntries(Object.keys(v).map((k) => [k, MASKED]))
          : MASKED;
    } else out[clean(key)] = shrink(v, depth + 1);
  }
  return out;
}

/** The detail of a request's body: secrets masked, size bounded. */
export function auditDetail(body: unknown): Record<string, unknown> {
  const shrunk = shrink(body ?? {}, 0);
  const detail: Record<string, unknown> =
    shrunk && typeof shrunk === 'object' && !Array.isArray(shrunk)
      ? (shrunk as Record<string, unknown>)
      : { body: shrunk };
  if (Buffer.byteLength(JSON.stringify(detail)) <= MAX_DETAIL_BYTES) return detail;
  return { fields: Object.keys(detail).slice(0, 50), cut: true };
}
