/** Variable types of version 3 workflow JSON. */
export const VARIABLE_TYPES = ['String', 'Int32', 'Int64', 'Double', 'Boolean', 'DateTime', 'Object'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];

export function isVariableType(t: string): t is VariableType {
  return (VARIABLE_TYPES as readonly string[]).includes(t);
}

export type Conversion = { ok: true; value: unknown } | { ok: false };

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function toNumber(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return undefined;
}

/**
 * Converts a JSON value to a variable's type, the way a user setting a variable would expect ("42" is a
 * valid Int32, 4.2 is not). `null` is valid for every type: it clears the variable.
 */
export function convertValue(typeName: VariableType, value: unknown): Conversion {
  if (value === null) return { ok: true, value: null };
  switch (typeName) {
    case 'String':
      if (typeof value === 'string') return { ok: true, value };
      if (typeof value === 'number' || typeof value === 'boolean') return { ok: true, value: String(value) };
      return { ok: false };
    case 'Int32':
    case 'Int64': {
      const n = toNumber(value);
      if (n === undefined || !Number.isInteger(n)) return { ok: false };
      if (typeName === 'Int32' && (n < INT32_MIN || n > INT32_MAX)) return { ok: false };
      if (typeName === 'Int64' && !Number.isSafeInteger(n)) return { ok: false };
      return { ok: true, value: n };
    }
    case 'Double': {
      const n = toNumber(value);
      return n === undefined ? { ok: false } : { ok: true, value: n };
    }
    case 'Boolean':
      if (typeof value === 'boolean') return { ok: true, value };
      if (value === 'true' || value === 'false') return { ok: true, value: value === 'true' };
      return { ok: false };
    case 'DateTime': {
      if (typeof value !== 'string') return { ok: false };
      // An ISO 8601 date or date-time; stored normalised to UTC.
      if (!/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(value))
        return { ok: false };
      const t = Date.parse(value);
      return Number.isNaN(t) ? { ok: false } : { ok: true, value: new Date(t).toISOString() };
    }
    case 'Object':
      return { ok: true, value };
  }
}
