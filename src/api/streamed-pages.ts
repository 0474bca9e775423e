import type { Context } from 'hono';
import { stream } from 'hono/streaming';
import type { AppEnv } from './context.js';

/**
 * An answer streamed a page at a time from `pages` (whose first page was read before the answer started, so a
 * failing first query is still a problem+json answer): `head`, each page as `page` writes it, `tail`. A page that
 * fails after the answer began (the database went away, a statement timed out) breaks the response off, so that
 * no client takes a cut answer for a whole one (a 200 that ends normally would look complete at the HTTP level).
 */
export function streamPages<T>(
  c: Context<AppEnv>,
  first: IteratorResult<T>,
  pages: AsyncGenerator<T>,
  what: string,
  write: { head: string; page: (page: T) => string; tail: string },
) {
  return stream(c, async (out) => {
    let aborted = false;
    out.onAbort(() => {
      aborted = true;
    });
    try {
      if (write.head) await out.write(write.head);
      for (let page = first; !page.done && !aborted; page = await pages.next()) await out.write(write.page(page.value));
      if (write.tail) await out.write(write.tail);
    } catch (err) {
      c.get('logger').warn({ err }, `${what} failed after its first page; the answer is broken off`);
      await (out as unknown as { writer: WritableStreamDefaultWriter }).writer.abort(err).catch(() => undefined);
    } finally {
      await pages.return(undefined);
    }
  });
}
