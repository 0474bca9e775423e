import { AsyncLocalStorage } from 'node:async_hooks';

/** Who an entry names: a user, an API key, or no one (a sign-in that failed, with the name tried). */
export interface AuditActor {
  kind: 'user' | 'apiKey' | 'anonymous';
  id: string | null;
  name: string | null;
}

/**
 * What the code that serves a request adds to its entry: the target a create made (its id is known only
 * there), and the actor and tenant of a sign-in. Read by the request's trail
 * (src/api/audit-trail.ts) when it writes the entry.
 */
export interface AuditNotes {
  /** What the request did, where its route does more than one thing (the console's New plan form). */
  action?: string;
  targetId?: string;
  actor?: AuditActor;
  tenantKey?: string;
  signedIn?: boolean;
}

/** A request under the audit trail: what its entry will say beyond what the request itself shows. */
export interface AuditScope {
  notes: AuditNotes;
  /** The request's body, as read (its secrets masked in the entry). */
  body?: unknown;
}

export const auditScope = new AsyncLocalStorage<AuditScope>();

/** Adds to the entry of the request being served (nothing outside a request). */
export function noteAudit(notes: AuditNotes): void {
  const scope = auditScope.getStore();
  if (scope) Object.assign(scope.notes, notes);
}

/** Keeps the request's body for its entry's detail (read once, by the input guard or a console form). */
export function noteAuditBody(body: unknown): void {
  const scope = auditScope.getStore();
  if (scope) scope.body = body;
}
