/** Who is calling: an API key or a signed-in user, with its effective grants and its tenant. */
export interface Principal {
  kind: 'api-key' | 'user';
  id: string;
  name: string;
  /** null is the default tenant. */
  tenantId: string | null;
  permissions: string[];
  /** The session behind a user's access token. */
  sessionId?: string;
}

/** The storage key of a tenant: the default tenant (null, or '' which reads as null) is stored as ''. */
export function tenantKey(tenantId: string | null | undefined): string {
  return tenantId ?? '';
}

/** The API form of a stored tenant key. */
export function tenantOut(key: string): string | null {
  return key === '' ? null : key;
}

/** What a request's credentials came to: its principal, or why it has none (thrown where a route needs one). */
export type Identity = { principal: Principal } | { refused: Error } | { none: true };
