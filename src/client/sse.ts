import type { JobCounts, PlanView } from '../alterations/views.js';

/** What `GET /alterations/{planId}/events` sends (contract section 7). */
export interface PlanProgress {
  status: number;
  jobCounts: JobCounts;
  instancesPerSecond: number;
  pauseReason: string | null;
}

export type PlanEvent = { event: 'progress'; data: PlanProgress } | { event: 'done'; data: PlanView };

/**
 * Reads a text/event-stream body (the WHATWG format: `event:`/`data:` lines, a blank line ends an event,
 * `:` lines are comments) and yields its events with their JSON data, until the stream ends.
 */
export async function* readServerSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<PlanEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = 'message';
  let data: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      if (line === '') {
        if (data.length > 0) yield { event, data: JSON.parse(data.join('\n')) } as PlanEvent;
        event = 'message';
        data = [];
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
      }
    }
  }
}
