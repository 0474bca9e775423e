import type { JobCounts, PlanView } from '../alterations/views.js';

/** What `GET /alterations/{planId}/events` sends (contract section 7). */
export interface PlanProgress {
  status: number;
  jobCounts: JobCounts;
  instancesPerSecond: number;
  pauseReason: string | null;
}

export type PlanEvent = { event: 'progress'; data: PlanProgress } | { event: 'done'; data: PlanView };

/** The stream broke a bound (an event too large): not a stream cut short, so nothing to reconnect for. */
export class StreamLimitError extends Error {
  override name = 'StreamLimitError';
}

/** An event whose data is not JSON: the stream is not this service's. */
export class MalformedEventError extends Error {
  override name = 'MalformedEventError';
}

/** Bounds of a stream read from a server that may be broken or hostile. */
export interface StreamLimits {
  /** Fail when nothing arrives for this long (the service sends a keep-alive every 15 s). */
  idleTimeoutMs?: number;
  /** Fail when one event (or a line with no end) grows past this many bytes. */
  maxEventBytes?: number;
}

/**
 * Reads a text/event-stream body (the WHATWG format: `event:`/`data:` lines, a blank line ends an event,
 * `:` lines are comments) and yields its events with their JSON data, until the stream ends. Each chunk is
 * scanned once and a line's pieces are joined once it ends (a line that never ends costs no more than its
 * bytes), within `limits`.
 */
export async function* readServerSentEvents(
  body: ReadableStream<Uint8Array>,
  limits: StreamLimits = {},
): AsyncGenerator<PlanEvent> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let partial: string[] = [];
  let partialLength = 0;
  /** The last line ended with CR: a LF that comes next (maybe in the next chunk) belongs to it. */
  let afterCr = false;
  let pending = 0;
  let event = 'message';
  let data: string[] = [];
  try {
    for (;;) {
      const next = await readWithin(reader, limits.idleTimeoutMs);
      if (next.done) break;
      let text = decoder.decode(next.value, { stream: true });
      if (afterCr && text.startsWith('\n')) text = text.slice(1);
      if (text) afterCr = false;
      let start = 0;
      for (let i = 0; i < text.length; i++) {
        const ch = text.charCodeAt(i);
        if (ch !== 10 && ch !== 13) continue;
        const line = partial.join('') + text.slice(start, i);
        partial = [];
        partialLength = 0;
        if (ch === 13 && text.charCodeAt(i + 1) === 10) i++;
        else if (ch === 13 && i === text.length - 1) afterCr = true;
        start = i + 1;
        if (line === '') {
          if (data.length > 0) yield { event, data: parseData(event, data.join('\n')) } as PlanEvent;
          event = 'message';
          data = [];
          pending = 0;
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') event = value;
          else if (field === 'data') {
            data.push(value);
            pending += value.length;
          }
        }
      }
      if (start < text.length) {
        partial.push(text.slice(start));
        partialLength += text.length - start;
      }
      if (limits.maxEventBytes && pending + partialLength > limits.maxEventBytes)
        throw new StreamLimitError(`The event stream sent an event larger than ${limits.maxEventBytes} bytes`);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function parseData(event: string, data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new MalformedEventError(`a ${event} event whose data is not JSON`);
  }
}

/** The next chunk, or an error when none comes within `ms`. */
async function readWithin(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  ms: number | undefined,
): ReturnType<ReadableStreamDefaultReader<Uint8Array>['read']> {
  if (!ms) return reader.read();
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      reader.read(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`The event stream sent nothing for ${Math.round(ms / 1000)} s`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
