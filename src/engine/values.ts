/** Variable types of version 3 workflow JSON. */
export const VARIABLE_TYPES = ['String', 'Int32', 'Int64', 'Double', 'Boolean', 'DateTime', 'Object'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];

export function isVariableType(t: string): t is VariableType {
  return (VARIABLE_TYPES as readonly string[]).includes(t);
}

export type Conversion = { ok: true; value: unknown } | { ok: false };

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** A number written in decimal: `42`, `-4.5`, `1e3` (not `0x10`, `0b1`, `Infinity`). */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function toNumber(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && DECIMAL.test(value.trim()) && Number.isFinite(Number(value))) return Number(value);
  return undefined;
}

/** An ISO 8601 date or date-time: year, month, day, then hours, minutes, seconds, fraction, offset. */
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|([+-])(\d{2}):?(\d{2}))?)?$/;

/**
 * The UTC instant of an ISO 8601 date or date-time, read exactly: a date or time that does not exist
 * (`2026-02-31`, `24:00`) is no instant (JavaScript's parser would roll it over), and one without an offset is
 * UTC (not the server's zone). Years 1 to 9999, before and after the offset is applied.
 */
function parseDateTime(value: string): string | undefined {
  const m = DATE_TIME.exec(value);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !isLeap(year) ? 1 : 0);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > days || hour > 23 || minute > 59 || second > 59)
    return undefined;
  const offsetHours = Number(m[10] ?? 0);
  const offsetMinutes = Number(m[11] ?? 0);
  if (offsetHours > 23 || offsetMinutes > 59) return undefined;
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute, second, Math.floor(Number(`0.${m[7] ?? 0}`) * 1000));
  const sign = m[9] === '-' ? -1 : 1;
  const t = at.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000;
  const utcYear = new Date(t).getUTCFullYear();
  return utcYear < 1 || utcYear > 9999 ? undefined : new Date(t).toISOString();
}

const isLeap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

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
      // An ISO 8601 date or date-time; stored normalised to UTC.
      const utc = typeof value === 'string' ? parseDateTime(value) : undefined;
      return utc === undefined ? { ok: false } : { ok: true, value: utc };
    }
    case 'Object':
      return { ok: true, value };
  }
}
