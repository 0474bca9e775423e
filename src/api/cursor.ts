import { createHmac, timingSafeEqual } from 'node:crypto';
import { ValidationError } from '../errors.js';

/**
 * Paging cursors carry a MAC made with the service's signing key (AUTH_SIGNING_KEY, shared by every API
 * node), so a cursor the service did not issue is a 400 before anything reads it.
 */
const mac = (key: Uint8Array, cursor: string) =>
  createHmac('sha256', key).update(`cursor:${cursor}`).digest().subarray(0, 16);

export function sealCursor(key: Uint8Array, cursor: string): string;
export function sealCursor(key: Uint8Array, cursor: string | null): string | null;
export function sealCursor(key: Uint8Array, cursor: string | null): string | null {
  return cursor === null ? null : `${cursor}.${mac(key, cursor).toString('base64url')}`;
}

export function openCursor(key: Uint8Array, sealed: string, path = '/query/after'): string {
  const dot = sealed.lastIndexOf('.');
  const cursor = sealed.slice(0, dot);
  const given = Buffer.from(sealed.slice(dot + 1), 'base64url');
  const expected = mac(key, cursor);
  if (dot < 0 || given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new ValidationError('The cursor is not valid', [{ path, message: 'Not a cursor returned by this endpoint' }]);
  }
  return cursor;
}

/** A page query's `after`, opened: undefined for the first page. */
export function openAfter(key: Uint8Array, after: string | undefined): string | undefined {
  return after === undefined ? undefined : openCursor(key, after);
}
