/** A search term for `LIKE … ESCAPE '\'`: `%`, `_` and `\` match themselves. */
export function escapeLike(term: string): string {
  return term.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}
