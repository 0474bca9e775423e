import { noteAuditBody } from '../audit/scope.js';
import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import { DomainError, type FieldError, pointer, ValidationError } from '../errors.js';
import type { AppEnv } from './context.js';
import { arrivedBody, dropOverflow } from './body-arrival.js';
import { badString, inputViolations } from '../vocabulary/input.js';

const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;
/** Bytes of an unwanted body read and discarded so that the connection stays usable; past it, close. */
const DRAIN_BYTES = 8 * 1024 * 1024;
const DRAIN_MS = 5_000;

/** A console form's bound: MAX_BODY_BYTES twice over (New plan's Plan JSON beside its fields) and then some. */
export const formBodyMax = (maxBodyBytes: number) => maxBodyBytes * 2 + 64 * 1024;

/** Requests whose body this module has read (or discarded): nothing else reads a body. */
const handled = new WeakSet<Request>();

export function requestHasBody(c: Context<AppEnv>): boolean {
  if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(c.req.method)) return false;
  const length = c.req.header('content-length');
  return (length !== undefined && length !== '0') || c.req.header('transfer-encoding') !== undefined;
}

/** Every part decodes as percent-encoded UTF-8. */
function decodes(parts: string[]): boolean {
  try {
    for (const part of parts) decodeURIComponent(part);
    return true;
  } catch {
    return false;
  }
}

/**
 * The per-route input guard, run after authentication and routing (secureRoute puts it after the
 * permission check): query values and path parameters follow the input rule; on a route that takes a
 * body, the body must be JSON (415) and is read here, once, within MAX_BODY_BYTES (413), as UTF-8,
 * parsed, and checked for depth and strings before the route's schema validates it.
 */
export function inputGuard(body?: { required: boolean }) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const errors: FieldError[] = [];
    // Hono keeps a part it cannot decode as it came (`%FF` would be the event named "%FF"): refused here.
    const url = new URL(c.req.url);
    if (!decodes(url.pathname.split('/')))
      errors.push({ path: pointer(['path']), message: 'is not valid percent-encoded UTF-8' });
    if (!decodes(url.search.slice(1).replace(/\+/g, ' ').split(/[&=]/)))
      errors.push({ path: pointer(['query']), message: 'is not valid percent-encoded UTF-8' });
    for (const [key, values] of Object.entries(c.req.queries())) {
      const bad = badString(key) ?? values.map(badString).find(Boolean);
      if (bad) errors.push({ path: pointer(['query', key]), message: bad });
    }
    for (const [key, value] of Object.entries(c.req.param() as Record<string, string>)) {
      const bad = badString(value);
      if (bad) errors.push({ path: pointer(['params', key]), message: bad });
    }
    if (errors.length) throw new ValidationError('The request is not valid; see errors', errors);

    // A route that takes no body ignores one (settleBody discards it); one that does requires JSON.
    if (!body) return next();
    const hasBody = requestHasBody(c);
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim();
    if (hasBody && !JSON_TYPE.test(type)) {
      throw new DomainError(`Request bodies must be application/json, not "${type || 'none'}"`, 415);
    }
    if (hasBody || JSON_TYPE.test(type)) {
      const parsed = await readJson(c, body.required);
      if (parsed !== undefined) c.req.json = <T>() => Promise.resolve(parsed as T);
      noteAuditBody(parsed);
    }
    await next();
  });
}

async function readJson(c: Context<AppEnv>, required: boolean): Promise<unknown> {
  const max = c.get('deps').config.maxBodyBytes;
  const bytes = await readBodyBytes(c, max);
  if (bytes === undefined) throw new DomainError(`The request body is larger than ${max} bytes`, 413);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ValidationError('The request body is not valid UTF-8', [{ path: '', message: 'Not valid UTF-8' }]);
  }
  if (text.trim() === '') {
    if (!required) return {};
    throw new ValidationError('A JSON request body is required', [{ path: '', message: 'Required' }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ValidationError(`Malformed JSON in request body: ${(err as Error).message}`, [
      { path: '', message: 'Malformed JSON' },
    ]);
  }
  const violations = inputViolations(value);
  if (violations.length) throw new ValidationError('The request is not valid; see errors', violations);
  return value;
}

/**
 * The request's body, up to `max` bytes: as it arrived before the request took its place (src/api/body-arrival.ts),
 * else read from its stream. A larger one is read on and discarded (bounded), so the 413 can go out on a connection
 * that stays usable (a body longer than the read-ahead gets `Connection: close`); `undefined` says it was too large.
 * The one reader of request bodies: JSON here, the console's forms (src/console/form.ts) through it too.
 */
export async function readBodyBytes(c: Context<AppEnv>, max: number): Promise<Uint8Array | undefined> {
  handled.add(c.req.raw);
  const ahead = arrivedBody(c.req.raw);
  if (ahead) {
    if (!ahead.overflow && ahead.bytes.byteLength <= max) return ahead.bytes;
    if (ahead.overflow && (await dropOverflow(c.req.raw))) closeAfter(c);
    return undefined;
  }
  const stream = c.req.raw.body;
  if (!stream) return new Uint8Array();
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      if (!(await discard(reader, DRAIN_BYTES))) closeAfter(c);
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/** Reads and drops up to `limit` bytes within DRAIN_MS; true when the body ended. */
async function discard(reader: ReadableStreamDefaultReader<Uint8Array>, limit: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), DRAIN_MS);
  });
  try {
    let read = 0;
    for (;;) {
      const next = await Promise.race([reader.read(), timeout]);
      if (next === 'timeout') return false;
      if (next.done) return true;
      read += next.value.byteLength;
      if (read > limit) return false;
    }
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
  }
}

const mustClose = new WeakSet<Request>();
/** The answer to this request closes the connection (part of its body is left unread). */
export function closeAfter(c: Context<AppEnv>): void {
  mustClose.add(c.req.raw);
}

/**
 * After the response is built: a body nobody read (a 401, 403, 404, 405, 415 … answered first) is read
 * and discarded before the response goes out, so a keep-alive client can send its next request on the
 * same connection; a body too large to discard gets `Connection: close` instead.
 */
export async function settleBody(c: Context<AppEnv>): Promise<void> {
  if (!handled.has(c.req.raw) && arrivedBody(c.req.raw)?.overflow) {
    handled.add(c.req.raw);
    if (await dropOverflow(c.req.raw)) closeAfter(c);
  }
  if (!handled.has(c.req.raw) && requestHasBody(c) && c.req.raw.body && !c.req.raw.bodyUsed) {
    handled.add(c.req.raw);
    if (!(await discard(c.req.raw.body.getReader(), DRAIN_BYTES))) closeAfter(c);
  }
  if (mustClose.has(c.req.raw)) {
    // A new response, not an edited one: the Node adapter rebuilds cached responses from their original
    // headers, which would drop an edit.
    const headers = new Headers(c.res.headers);
    headers.set('connection', 'close');
    c.res = new Response(c.res.body, { status: c.res.status, headers });
  }
}
