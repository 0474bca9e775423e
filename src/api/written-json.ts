import type { Context, TypedResponse } from 'hono';

/**
 * What a route that documents a JSON answer returns when the service wrote the JSON itself (in time slices, as
 * Postgres made it) or streams it: typed as that route's answer. The route's schema documents the body and the
 * tests read it; this is the one place where a written body meets the route's declared type.
 */
export type WrittenJson = TypedResponse<never, 200, 'json'>;

/** A 200 with a JSON body written by the service (`application/json`). */
export function writtenJson(c: Context, body: string | ReadableStream): WrittenJson {
  return asWrittenJson(c.body(body, 200, { 'content-type': 'application/json' }));
}

/** A response made by a stream helper (Server-Sent Events, a streamed body), as the route's documented answer. */
export function asWrittenJson(response: Response): WrittenJson {
  return response as unknown as WrittenJson;
}
