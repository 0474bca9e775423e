import { ValidationError } from '../errors.js';

/**
 * A list's position as a cursor: base64url of `[tag, ...parts]` (the API seals it with its signing key,
 * src/api/cursor.ts). The tag names the list, so a cursor of one list is refused by another.
 */
export const encodePageCursor = (tag: string, parts: readonly unknown[]): string =>
  Buffer.from(JSON.stringify([tag, ...parts])).toString('base64url');

/**
 * The parts of a cursor of the list `tag`, checked strictly by `valid` (cursors are signed, but a crafted
 * position must be a 400, never a value SQL chokes on).
 */
export function decodePageCursor<T extends unknown[]>(
  cursor: string,
  tag: string,
  valid: (parts: unknown[]) => parts is T,
): T {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(parsed) && parsed[0] === tag && valid(parsed.slice(1))) return parsed.slice(1) as T;
  } catch {
    // fall through
  }
  throw new ValidationError('The cursor is not valid', [
    { path: '/query/after', message: 'Not a cursor returned by this endpoint' },
  ]);
}
