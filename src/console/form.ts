import { noteAuditBody } from '../audit/scope.js';
import type { Context } from 'hono';
import type { AppEnv } from '../api/context.js';
import { DomainError, type FieldError, pointer, ValidationError } from '../errors.js';
import { badString } from '../vocabulary/input.js';
import { formBodyMax, readBodyBytes } from '../api/request-body.js';

/**
 * The fields of a console form post (`application/x-www-form-urlencoded`, what an HTML form sends and the
 * script sends too), read within a bound: the API's MAX_BODY_BYTES twice over (New plan carries a submit
 * body in its Plan JSON field beside the form's own fields) and then some. Every value follows the input
 * rule the API applies (no NUL, well-formed Unicode).
 */
export async function readForm(c: Context<AppEnv>): Promise<URLSearchParams> {
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded')
    throw new DomainError(`A console form is sent as application/x-www-form-urlencoded, not "${type || 'none'}"`, 415);
  const max = formBodyMax(c.get('deps').config.maxBodyBytes);
  const bytes = await readBodyBytes(c, max);
  if (bytes === undefined) throw new DomainError(`The form is larger than ${max} bytes`, 413);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ValidationError('The form is not valid UTF-8');
  }
  const form = new URLSearchParams(text);
  const errors: FieldError[] = [];
  for (const [key, value] of form) {
    const why = badString(key) ?? badString(value);
    if (why) errors.push({ path: pointer(['form', key]), message: why });
  }
  if (errors.length) throw new ValidationError('The form is not valid; see errors', errors);
  noteAuditBody(Object.fromEntries(form));
  return form;
}

/** Query values and path parameters follow the input rule too (a NUL never reaches SQL). */
export function checkInputRule(c: Context<AppEnv>): void {
  const errors: FieldError[] = [];
  let path: string;
  try {
    path = decodeURIComponent(new URL(c.req.url).pathname);
  } catch {
    throw new ValidationError('The path is not valid percent-encoded UTF-8');
  }
  const pathProblem = badString(path);
  if (pathProblem) errors.push({ path: '/path', message: pathProblem });
  for (const [key, values] of Object.entries(c.req.queries())) {
    const why = badString(key) ?? values.map(badString).find(Boolean);
    if (why) errors.push({ path: pointer(['query', key]), message: why });
  }
  if (errors.length) throw new ValidationError('The request is not valid; see errors', errors);
}

/** A submit button's value or a field, trimmed; '' when absent. */
export const field = (form: URLSearchParams, name: string) => (form.get(name) ?? '').trim();
