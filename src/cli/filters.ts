import type { Filter } from '../client/index.js';
import { CliFailure } from './failure.js';

/**
 * Why an empty filter matched nothing, said wherever `wfa` shows what a filter selects: the service's
 * safeguard (contract section 4) is otherwise invisible, and "0 instances match" reads like a bug.
 */
export const EMPTY_FILTER_SELECTS_NOTHING =
  'the filter has no constraint, and a filter without one selects nothing unless it sets "emptyFilterSelectsAll": true (so that a mistake never selects every instance)';

/**
 * Whether a filter has no constraint at all, as the service reads it: every field absent, null, [] or ''
 * (a boolean is a constraint, true or false), and emptyFilterSelectsAll not true. Such a filter selects
 * nothing. A dry-run or preview says so only beside an answer that matched nothing (the service stays the
 * judge); a submit says it as a note, since its answer is only the plan's id.
 */
export function hasNoConstraint(filter: unknown): boolean {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) return false;
  const fields = Object.entries(filter as Record<string, unknown>);
  if (fields.some(([k, v]) => k === 'emptyFilterSelectsAll' && v === true)) return false;
  return fields.every(
    ([k, v]) => k === 'emptyFilterSelectsAll' || v == null || v === '' || (Array.isArray(v) && v.length === 0),
  );
}

/**
 * The filter of a file given to `plans dry-run`: its `filter` when it has one (a plan, the file `plans
 * submit` takes), else the file itself (a bare filter). A plan without a filter is said to be one, instead
 * of being sent as a filter that the service refuses for its `alterations`.
 */
export function filterOfFile(body: unknown, file: string): Filter {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    if ('filter' in body) return body.filter as Filter;
    if ('alterations' in body)
      throw new CliFailure(
        `${file} is a plan without a filter: add "filter": {…} (the instances it alters; plans submit needs it too), or give dry-run a bare filter`,
        2,
        'bad-file',
      );
  }
  return body as Filter;
}
