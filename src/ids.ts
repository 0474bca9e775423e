import { v7 } from 'uuid';

/** Generated identifiers are UUIDv7: opaque strings that sort by creation time. */
export function newId(): string {
  return v7();
}
