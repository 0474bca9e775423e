import { z } from '@hono/zod-openapi';
import { type FieldError, pointer } from '../errors.js';

/**
 * The one input rule (CONTRACT section 8), in two halves: schema primitives that every route schema uses
 * for integers and timestamps (so the OpenAPI document states the bounds), and `inputViolations`, which
 * the request reader (src/api/request-body.ts) runs over every query value, path parameter and JSON body
 * before any schema sees them.
 */

export const INT32_MIN = -2_147_483_648;
export const INT32_MAX = 2_147_483_647;
/** JSON deeper than this many nested objects and arrays is refused. */
export const MAX_JSON_DEPTH = 64;

/** An integer stored or used in SQL: it fits in a Postgres `integer`. */
export const Int32 = z.number().int().min(INT32_MIN).max(INT32_MAX);
/** The same, read from a query string. */
export const QueryInt32 = z.coerce.number().int().min(INT32_MIN).max(INT32_MAX);

const OFFSET = /(Z|[+-](\d{2}):(\d{2}))$/i;
const MAX_OFFSET_MINUTES = 18 * 60;

/**
 * An ISO 8601 timestamp with offset, years 1–9999 and offsets within ±18:00. Postgres only parses
 * offsets up to ±15:59, so SQL receives the parts from `timestampParts`, never the text.
 */
export const Timestamp = z.iso
  .datetime({ offset: true })
  .superRefine((value, ctx) => {
    const parts = timestampParts(value);
    if (parts.year < 1 || parts.year > 9999)
      ctx.addIssue({ code: 'custom', message: 'The year must be between 1 and 9999' });
    if (Math.abs(parts.offsetMinutes) > MAX_OFFSET_MINUTES)
      ctx.addIssue({ code: 'custom', message: 'The UTC offset must be within ±18:00' });
  })
  .openapi({
    description: 'ISO 8601 date-time with offset; years 1–9999, offsets within ±18:00',
    example: '2026-11-22T04:30:00.000Z',
    // The same bounds for generators reading the document (validation is the refinement above).
    pattern:
      '^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-](0[0-9]|1[0-7]):[0-5][0-9]|[+-]18:00)$',
  });

/** A validated timestamp split into its local date-time (no offset) and its offset east of UTC in minutes. */
export function timestampParts(value: string): { local: string; offsetMinutes: number; year: number } {
  const m = OFFSET.exec(value);
  const local = m ? value.slice(0, m.index) : value;
  const offsetMinutes =
    !m || m[1]!.toUpperCase() === 'Z' ? 0 : (m[1]!.startsWith('-') ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3]));
  return { local, offsetMinutes, year: Number(local.slice(0, 4)) };
}

/** Why a string may not enter the service: it holds NUL, or it is not well-formed Unicode. */
export function badString(s: string): string | undefined {
  if (s.includes('\u0000')) return 'Must not contain the NUL character';
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed())
    return 'Must be well-formed Unicode (no lone surrogates)';
  return undefined;
}

/**
 * Every violation of the string and depth rules in a parsed JSON value, named by JSON pointer under
 * `prefix`. Stops descending at the depth limit, so a hostile body costs no more than its size.
 */
export function inputViolations(value: unknown, prefix: (string | number)[] = [], limit = 20): FieldError[] {
  const out: FieldError[] = [];
  const walk = (v: unknown, path: (string | number)[], depth: number): void => {
    if (out.length >= limit) return;
    if (typeof v === 'string') {
      const why = badString(v);
      if (why) out.push({ path: pointer(path), message: why });
      return;
    }
    if (v === null || typeof v !== 'object') return;
    if (depth >= MAX_JSON_DEPTH) {
      out.push({ path: pointer(path), message: `JSON may be nested at most ${MAX_JSON_DEPTH} levels deep` });
      return;
    }
    if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, [...path, i], depth + 1));
      return;
    }
    for (const [key, item] of Object.entries(v)) {
      const why = badString(key);
      if (why) out.push({ path: pointer([...path, key]), message: `Property name: ${why}` });
      // JavaScript objects cannot hold it as data (it names their prototype): refused, never dropped silently.
      else if (key === '__proto__')
        out.push({ path: pointer([...path, key]), message: 'A property named "__proto__" is not accepted' });
      else walk(item, [...path, key], depth + 1);
    }
  };
  walk(value, prefix, 0);
  return out;
}
