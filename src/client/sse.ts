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
 * scanned once (a line that never ends costs no more than its bytes), within `limits`.
 */
export async function* readServerSentEvents(
  body: ReadableStream<Uint8Array>,
  limits: StreamLimits = {},
): AsyncGenerator<PlanEvent> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  let scanned = 0;
  let pending = 0;
  let event = 'message';
  let data: string[] = [];
  try {
    for (;;) {
      const next = await readWithin(reader, limits.idleTimeoutMs);
      if (next.done) break;
      buffer += decoder.decode(next.value, { stream: true });
      for (;;) {
        let newline = -1;
        for (let i = scanned; i < buffer.length; i++) {
          const ch = buffer.charCodeAt(i);
          if (ch === 10 || ch === 13) {
            newline = i;
            break;
          }
        }
        if (newline < 0) {
          scanned = buffer.length;
          break;
        }
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        scanned = 0;
        if (line === '') {
          if (data.length > 0) yield { event, data: JSON.parse(data.join('\n')) } as PlanEvent;
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
      if (limits.maxEventBytes && pending + buffer.length > limits.maxEventBytes)
        throw new StreamLimitError(`The event stream sent an event larger than ${limits.maxEventBytes} bytes`);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
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
