/** A problem at one place of a request body, named by a JSON pointer. */
export interface FieldError {
  path: string;
  message: string;
}

/** Domain errors: thrown by src/ code, mapped to problem+json in one place (src/api/problem.ts). */
export class DomainError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 401 | 403 | 404 | 408 | 409 | 413 | 415 | 429 | 503,
    readonly errors?: FieldError[],
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends DomainError {
  constructor(message: string, errors: FieldError[] = []) {
    super(message, 400, errors);
  }
}

export class UnauthorizedError extends DomainError {
  constructor(message: string) {
    super(message, 401);
  }
}

export class NotFoundError extends DomainError {
  constructor(message: string) {
    super(message, 404);
  }
}

export class ConflictError extends DomainError {
  constructor(message: string) {
    super(message, 409);
  }
}

export class ForbiddenError extends DomainError {
  constructor(message: string) {
    super(message, 403);
  }
}

/** Builds a JSON pointer from path segments (RFC 6901 escaping). */
export function pointer(segments: readonly (string | number)[]): string {
  if (segments.length === 0) return '';
  return '/' + segments.map((s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

/** Too many failed guesses: the caller may try again after `retryAfterSeconds`. */
export class TooManyAttemptsError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message, 429);
  }
}

/**
 * A tenant holds its whole share of a resource every tenant shares (contract section 8, "Tenant shares"):
 * 429 with Retry-After, for this tenant only; the others go on.
 */
export class TenantShareError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message, 429);
  }
}

/** The node itself is at a limit shared by all tenants: 503 with Retry-After. */
export class NodeBusyError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message, 503);
  }
}

const UNKNOWN_PROPERTY = 'Unknown property';

/** A field error for a key the schema does not know (`zodFieldErrors`): a typo, which no form field shows. */
export const isUnknownProperty = (e: FieldError): boolean => e.message.startsWith(UNKNOWN_PROPERTY);

/**
 * Zod issues as JSON-pointer field errors under `prefix`; an unknown property is named by its own path
 * (`unknownIn` says of what, e.g. "for Elsa.Connections.Http…").
 */
export function zodFieldErrors(
  error: {
    issues: readonly { code: string; path: readonly PropertyKey[]; message: string; keys?: readonly string[] }[];
  },
  prefix: (string | number)[] = [],
  unknownIn = '',
): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of error.issues) {
    const base = [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    if (issue.code === 'unrecognized_keys' && issue.keys) {
      for (const key of issue.keys)
        out.push({
          path: pointer([...base, key]),
          message: `${UNKNOWN_PROPERTY} "${key}"${unknownIn ? ` ${unknownIn}` : ''}`,
        });
    } else if (issue.code === 'invalid_type' && issue.message.endsWith('received undefined')) {
      // A field left out says so: "Required", not "received undefined".
      out.push({
        path: pointer(base),
        message: issue.message.replace(/^Invalid input: (.*), received undefined$/, 'Required: $1'),
      });
    } else {
      out.push({ path: pointer(base), message: issue.message });
    }
  }
  return out;
}
