import type { Page } from '../client/index.js';
import { CliFailure } from './failure.js';
import { safeCell, shellWord, tableWriter } from './format.js';

/** The paging options of a list command: `--after <cursor>` and `--all`. */
export interface PagingOptions {
  after?: string;
  all?: boolean;
}

interface PagingIo {
  json: boolean;
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * Prints a list the API gives a page at a time (`{items, nextCursor}`): from `--after`, one page, and when
 * there is more, a hint on standard error with the command that prints the next one; with `--all`, every
 * page to the end, each printed as it arrives. --json prints the page as the API sent it, or with --all one
 * item per line (JSON Lines), so that a long list streams.
 */
export async function printPages<T>(
  fetchPage: (after: string | undefined) => Promise<Page<T>>,
  o: PagingOptions,
  io: PagingIo,
  human: { columns: string[]; row: (item: T) => Record<string, unknown>; more: (cursor: string) => string },
): Promise<void> {
  const table = tableWriter(human.columns, io.out);
  let after = o.after;
  for (;;) {
    const page = await fetchPage(after);
    if (!io.json) table.add(page.items.map(human.row));
    else if (o.all) for (const item of page.items) io.out(JSON.stringify(item));
    else io.out(JSON.stringify(page, null, 2));
    const next = page.nextCursor;
    if (!next) break;
    if (!o.all) {
      if (!io.json) io.err(safeCell(`more: ${human.more(next)}`));
      break;
    }
    if (next === after)
      throw new CliFailure(`The service gave the cursor ${safeCell(next)} twice; stopping`, 1, 'error');
    after = next;
  }
  if (!io.json) table.end();
}

/**
 * The command line that prints the page after `cursor`: the user's own arguments (as `wfa` got them) with
 * `--after <cursor>` instead of any they gave.
 */
export function nextPageCommand(argv: string[], cursor: string): string {
  const end = argv.indexOf('--');
  const options = end < 0 ? argv : argv.slice(0, end);
  const kept: string[] = [];
  for (let i = 0; i < options.length; i++) {
    if (options[i] === '--after') i++;
    else if (!options[i]!.startsWith('--after=')) kept.push(options[i]!);
  }
  const rest = end < 0 ? [] : argv.slice(end);
  return ['wfa', ...kept, '--after', cursor, ...rest].map(shellWord).join(' ');
}
