import type { Context } from 'hono';
import { DomainError, NodeBusyError } from '../errors.js';
import { AbandonedError } from '../vocabulary/time-slice.js';
import type { AppEnv } from './context.js';

/**
 * No client holds a share by being slow (contract section 8): a request's body is read in full before the
 * request takes its place in any share (the tenant's requests in flight, the anonymous places, a database
 * connection), and a body that takes longer than REQUEST_BODY_TIMEOUT_MS ends with a 408 and
 * `Connection: close`. A client that trickles a sign-in body one byte at a time then holds a socket and a
 * timer, never a place another client waits for. (Slow headers are Node's: the server's `headersTimeout`.)
 *
 * The bytes wait here for whoever reads the body (src/api/request-body.ts for JSON, src/console/form.ts for
 * forms), which applies its own size limit to them. At most `limit` bytes are read ahead; a longer body is
 * left in its stream, marked, and refused (413) by its reader. All bodies read ahead on a node together hold
 * at most BUFFERED_BYTES_MAX: past it a request is refused at once (503), so that many connections sending
 * large bodies at once cannot fill the node's memory either.
 */

/** A request's body as it arrived: its bytes, and whether more followed past the read-ahead limit. */
export interface ArrivedBody {
  bytes: Uint8Array;
  /** The body was longer than the read-ahead limit: the rest is still in the request's stream, unread. */
  overflow: boolean;
}

const arrived = new WeakMap<Request, ArrivedBody>();

/** The body read ahead for this request, if it was. */
export const arrivedBody = (request: Request): ArrivedBody | undefined => arrived.get(request);

/** The bytes of request bodies read ahead and held on this node now (all requests). */
let buffered = 0;
/** At most this many bytes of bodies read ahead at once on a node (with the default 1 MiB MAX_BODY_BYTES, 64 of them). */
export const bufferedBytesMax = (maxBodyBytes: number) => Math.max(64 * 1024 * 1024, 32 * maxBodyBytes);

/** A body (or headers) that took longer than REQUEST_BODY_TIMEOUT_MS: 408, and the connection is closed. */
export class RequestTimeoutError extends DomainError {
  constructor(message: string) {
    super(message, 408);
  }
}

/** Does the request carry a body (a length other than 0, or chunks)? */
export function carriesBody(request: Request): boolean {
  if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(request.method)) return false;
  const length = request.headers.get('content-length');
  return (length !== null && length !== '0') || request.headers.has('transfer-encoding');
}

/**
 * Reads the request's body ahead, up to `limit` bytes, within `timeoutMs` of now; afterwards its readers
 * find it in `arrivedBody`. A request without a body, or one read already, returns at once. Too slow: a
 * RequestTimeoutError (the caller closes the connection); the client gone: AbandonedError; the node's
 * budget of buffered bodies spent: NodeBusyError. `release` (called when the request ends) gives the bytes
 * back to the node's budget.
 */
export async function awaitBody(
  c: Context<AppEnv>,
  opts: { limit: number; timeoutMs: number; budget: number },
): Promise<() => void> {
  const request = c.req.raw;
  if (!carriesBody(request) || arrived.has(request) || !request.body || request.bodyUsed) return () => undefined;
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let held = 0;
  const release = () => {
    buffered -= held;
    held = 0;
  };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), opts.timeoutMs);
  });
  let overflow = false;
  let finished = false;
  try {
    for (;;) {
      let next: Awaited<ReturnType<typeof reader.read>> | 'late';
      try {
        next = await Promise.race([reader.read(), late]);
      } catch {
        throw new AbandonedError('the client went away while its request body arrived');
      }
      if (next === 'late' && overflow) break;
      if (next === 'late') {
        throw new RequestTimeoutError(
          `The request body did not arrive within ${opts.timeoutMs} ms (REQUEST_BODY_TIMEOUT_MS); send it at once, then retry`,
        );
      }
      if (next.done) {
        finished = true;
        break;
      }
      size += next.value.byteLength;
      if (size > opts.limit) {
        if (!overflow) chunks.length = 0;
        overflow = true;
        // Read on and dropped while it comes at once (a keep-alive client's next request then follows on the
        // same connection); a longer or slower rest stays unread, and the connection is closed after the answer.
        if (size > opts.limit + DRAIN_BYTES) break;
        continue;
      }
      if (buffered + next.value.byteLength > opts.budget) {
        throw new NodeBusyError('This node holds as many request bodies as it may at once; retry in a moment', 1);
      }
      buffered += next.value.byteLength;
      held += next.value.byteLength;
      chunks.push(next.value);
    }
  } catch (err) {
    release();
    await reader.cancel().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const drained = finished;
  if (drained) reader.releaseLock();
  // A body longer than the read-ahead keeps none of its bytes: its reader refuses it (413) by `overflow`.
  arrived.set(request, { bytes: overflow ? new Uint8Array() : Buffer.concat(chunks), overflow });
  if (overflow) release();
  if (!drained) overflowReaders.set(request, reader);
  return release;
}

/** Bytes of a body past the read-ahead limit read and dropped, so that the connection can be kept (as request-body.ts). */
const DRAIN_BYTES = 8 * 1024 * 1024;

/** The reader left on a body longer than the read-ahead limit (to be cancelled by whoever refuses it). */
const overflowReaders = new WeakMap<Request, ReadableStreamDefaultReader<Uint8Array>>();

/** Drops the unread rest of a body longer than the read-ahead limit; true when there was one (close the connection). */
export async function dropOverflow(request: Request): Promise<boolean> {
  const reader = overflowReaders.get(request);
  overflowReaders.delete(request);
  await reader?.cancel().catch(() => undefined);
  return reader !== undefined;
}
