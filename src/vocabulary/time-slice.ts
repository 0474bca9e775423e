import { setImmediate as nextTurn } from 'node:timers/promises';

/** How long a loop may run on the event loop before it lets other work in (contract section 8: ≤ 100 ms). */
export const SLICE_MS = 15;

/** Thrown at a yield point when the work's client went away: the rest of the work is not done. */
export class AbandonedError extends Error {
  override name = 'AbandonedError';
}

/**
 * Cooperative time slicing for work whose cost grows with its input (a preview over instances with
 * thousands of bookmarks, a plan batch, a long run of pure steps): the loop calls `yield()` between items,
 * which returns at once while the slice lasts and otherwise awaits one turn of the event loop (a
 * `setImmediate`), so that every other request's I/O is served in between. A loop that never yields held
 * the node for 30 s in an attack run, and its heartbeats and probes with it.
 *
 * With a signal, a yield point also ends work whose client has gone: it throws `AbandonedError`.
 */
export class TimeSlice {
  private started = performance.now();

  constructor(
    private readonly signal?: AbortSignal | undefined,
    private readonly sliceMs = SLICE_MS,
  ) {}

  /** Whether the slice is spent (a caller may prepare a yield point of its own). */
  get spent(): boolean {
    return performance.now() - this.started >= this.sliceMs;
  }

  /** Throws when abandoned; lets the event loop turn when the slice is spent. */
  async yield(): Promise<void> {
    if (this.signal?.aborted) throw new AbandonedError('the client went away; the work was stopped');
    if (!this.spent) return;
    await nextTurn();
    this.started = performance.now();
    if (this.signal?.aborted) throw new AbandonedError('the client went away; the work was stopped');
  }
}

/** `items.map(fn)` in time slices: `fn` is synchronous, the map yields between items when the slice is spent. */
export async function mapInSlices<T, R>(
  items: readonly T[],
  fn: (item: T, index: number) => R,
  slice: TimeSlice = new TimeSlice(),
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  for (let i = 0; i < items.length; i++) {
    out[i] = fn(items[i]!, i);
    await slice.yield();
  }
  return out;
}

/**
 * `JSON.stringify({...value, [key]: items})` with its long array written an item at a time in time
 * slices, ending with a newline as every answer of the API does: a page of 1,000 jobs whose logs repeat
 * 100 alterations each is 10 MB of JSON, and one `JSON.stringify` of it held the event loop for its whole
 * length. The array's place among the keys is where `key` is in `value` (or last).
 */
export async function jsonInSlices(
  value: Record<string, unknown>,
  key: string,
  items: readonly unknown[],
  slice: TimeSlice = new TimeSlice(),
): Promise<string> {
  const parts: string[] = [];
  for (let i = 0; i < items.length; i++) {
    parts.push(JSON.stringify(items[i]) ?? 'null');
    await slice.yield();
  }
  const placeholder = `\u0000${key}\u0000`;
  const outer = JSON.stringify({ ...value, [key]: placeholder });
  const at = outer.indexOf(JSON.stringify(placeholder));
  return `${outer.slice(0, at)}[${parts.join(',')}]${outer.slice(at + JSON.stringify(placeholder).length)}\n`;
}
