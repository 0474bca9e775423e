import type { Context } from 'hono';
import type { Child } from 'hono/jsx';
import type { AppEnv } from '../api/context.js';
import { handleError, type Problem } from '../api/problem.js';

/**
 * An error as the API would answer it (contract section 1): the same `handleError` makes the problem
 * document (a domain error's status and detail, a generic 500 with the trace id, logged), and the console
 * shows it. So the console says what the API says, word for word.
 */
export async function problemOf(err: Error, c: Context<AppEnv>): Promise<Problem> {
  const answer = handleError(err, c);
  return (await answer.json()) as Problem;
}

/** A problem shown as its detail, with each field error (JSON pointer: message) and the trace id. */
export function ProblemBox(props: { problem: Problem | undefined; heading?: string }) {
  const p = props.problem;
  if (!p) return null;
  return (
    <section class="problem" role="alert" aria-labelledby="problem-title">
      <h2 id="problem-title">{props.heading ?? `${p.title} (${p.status})`}</h2>
      <p class="wrap">{p.detail}</p>
      {p.errors?.length ? (
        <ul>
          {p.errors.map((e) => (
            <li class="wrap">
              <code>{e.path || '(body)'}</code>: {e.message}
            </li>
          ))}
        </ul>
      ) : null}
      {p.traceId ? <small class="muted">Trace id {p.traceId}</small> : null}
    </section>
  );
}

/** A message about what just happened (after a form), announced politely. */
export function Notice(props: { text: string | undefined }) {
  return (
    <p class="notice" role="status" id="notice" hidden={!props.text}>
      {props.text ?? ''}
    </p>
  );
}

/** What a user without the permission sees instead of an action (contract section 11). */
export function NotAllowed(props: { what: string; permission: string }) {
  return <p class="muted">{`You may not ${props.what}: that requires the permission "${props.permission}".`}</p>;
}

/** A field's error under it, tied to it by `aria-describedby` (`fieldErrorId`). */
export function FieldError(props: { id: string; message: string | undefined }) {
  if (!props.message) return null;
  return (
    <small class="field-error" id={fieldErrorId(props.id)}>
      {props.message}
    </small>
  );
}

export const fieldErrorId = (id: string) => `${id}-error`;

/** The attributes of an input with (or without) an error. */
export function invalid(id: string, message: string | undefined) {
  return message ? { 'aria-invalid': 'true' as const, 'aria-describedby': fieldErrorId(id) } : {};
}

/** A table that scrolls inside its own box on a narrow screen (the page itself never scrolls sideways). */
export function Scroll(props: { children: Child; label: string }) {
  return (
    <div class="scroll" role="region" aria-label={props.label} tabindex={0}>
      {props.children}
    </div>
  );
}

/**
 * A table of items in its own scroll region (`label` names the region): a header row of column names, then
 * a row an item, whose first cell (`head`) names it and whose other cells `cells` gives. With no items,
 * `empty` stands in its place: an empty table would say nothing.
 */
export function Table<T>(props: {
  label: string;
  columns: readonly string[];
  rows: readonly T[];
  head: (item: T) => Child;
  cells: (item: T) => Child;
  empty: Child;
  /** Attributes the script reads: of the table (a live list's URL), of each row (its item's id). */
  tableAttrs?: Record<string, string>;
  rowAttrs?: (item: T) => Record<string, string>;
}) {
  if (props.rows.length === 0) return <>{props.empty}</>;
  return (
    <Scroll label={props.label}>
      <table {...props.tableAttrs}>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th scope="col">{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((item) => (
            <tr {...props.rowAttrs?.(item)}>
              <th scope="row">{props.head(item)}</th>
              {props.cells(item)}
            </tr>
          ))}
        </tbody>
      </table>
    </Scroll>
  );
}

/** A list's page links: back to its first page and on to the next, each only where there is one. */
export function Pager(props: {
  /** What is paged: "Pages of …", and the two links' words. */
  of: { noun: string; first: string; next: string };
  /** The address of the first page (no cursor) or of the page after `after`. */
  link: (after?: string) => string;
  /** The cursor of the page shown (none on the first page). */
  after: string | null | undefined;
  /** The cursor of the next page (none on the last). */
  next: string | null | undefined;
}) {
  return (
    <nav class="pager" aria-label={`Pages of ${props.of.noun}`}>
      {props.after ? <a href={props.link()}>{props.of.first}</a> : null}
      {props.next ? <a href={props.link(props.next)}>{props.of.next}</a> : null}
    </nav>
  );
}

/** A choice of a select: its value, and the label shown when that differs. */
export type Choice = string | { value: string; label: string };

/** A labelled select of `choices`, the one whose value is `value` chosen; `any` labels an empty choice first. */
export function Select(props: { id: string; label: string; value: string; choices: readonly Choice[]; any?: string }) {
  return (
    <div>
      <label for={props.id}>{props.label}</label>
      <select id={props.id} name={props.id}>
        {props.any !== undefined ? (
          <option value="" selected={props.value === ''}>
            {props.any}
          </option>
        ) : null}
        {props.choices.map((c) => {
          const { value, label } = typeof c === 'string' ? { value: c, label: c } : c;
          return (
            <option value={value} selected={props.value === value}>
              {label}
            </option>
          );
        })}
      </select>
    </div>
  );
}

/** A row of a description list whose value is a timestamp (`field`: the name the script updates it by). */
export function TimeFact(props: { term: string; iso: string | null | undefined; field?: string }) {
  return (
    <>
      <dt>{props.term}</dt>
      <dd data-field={props.field}>
        <Time iso={props.iso} />
      </dd>
    </>
  );
}

/** A timestamp as text, with its machine form. */
export function Time(props: { iso: string | null | undefined }) {
  if (!props.iso) return <span class="muted">—</span>;
  return <time datetime={props.iso}>{`${props.iso.slice(0, 10)} ${props.iso.slice(11, 19)} UTC`}</time>;
}
