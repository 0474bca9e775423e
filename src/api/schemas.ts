import { z } from '@hono/zod-openapi';
import { QueryInt32 } from '../vocabulary/input.js';

export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
    traceId: z.string().optional(),
  })
  .openapi('Problem');

const PROBLEM_TEXT: Record<number, string> = {
  400: 'Invalid request: `errors` names each offending field by JSON pointer',
  401: 'No, unknown or expired credentials',
  403: 'The permission named in `detail` is missing',
  404: 'Unknown id, or a resource of another tenant',
  409: 'Conflict',
  413: 'Body larger than MAX_BODY_BYTES',
  415: 'Body is not application/json',
  429: 'Too many failed attempts from this client or for this user name, or the tenant holds its whole share of a resource tenants share (type /problems/tenant-share-exhausted); retry after `Retry-After` seconds',
  500: 'Unexpected error: `detail` is generic; `traceId` matches the server log',
  503: 'A dependency (the database) is unavailable or too slow, or the node is at a limit shared by all tenants; retry later',
};

export type ProblemStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 500 | 503;

type ProblemResponse = {
  description: string;
  content: { 'application/problem+json': { schema: typeof ProblemSchema } };
};

/** OpenAPI entries for the problem responses a route can give, keyed by exactly those codes. */
export function problems<const C extends ProblemStatus>(...codes: C[]) {
  const out = {} as Record<C, ProblemResponse>;
  for (const code of codes) {
    out[code] = {
      description: PROBLEM_TEXT[code]!,
      content: { 'application/problem+json': { schema: ProblemSchema } },
    };
  }
  return out;
}

/** The usual problems of an authenticated route with a JSON body. */
export const BODY_ROUTE_PROBLEMS = problems(400, 401, 403, 413, 415);

/** A list given whole, with its length (the contract's `{items, totalCount}`). */
export const counted = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), totalCount: z.number().int() });

/** The query of a list read a page at a time: where the page starts (a cursor the service issued) and its size. */
export const PAGING = {
  after: z.string().max(500).optional().openapi({ description: 'The nextCursor of the previous page' }),
  limit: QueryInt32.min(1).max(1000).default(100),
};

/** A page's cursor to the next one. */
export const NextCursor = z
  .string()
  .nullable()
  .openapi({ description: 'Pass as `after` for the next page; null on the last page' });

export const jsonBody = <T extends z.ZodType>(schema: T, description?: string) => ({
  body: { required: true, content: { 'application/json': { schema } }, ...(description ? { description } : {}) },
});

export const jsonContent = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

/** The contract's InputDescriptor (connection configuration fields and activity inputs). */
export const InputDescriptorSchema = z
  .object({
    name: z.string(),
    typeName: z.string(),
    displayName: z.string(),
    description: z.string(),
    uiHint: z.string(),
    isRequired: z.boolean(),
    isSensitive: z.boolean(),
    defaultValue: z.unknown(),
    order: z.number().int(),
    options: z.array(z.object({ text: z.string(), value: z.string() })).optional(),
  })
  .openapi('InputDescriptor');
