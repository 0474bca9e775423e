import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import type pg from 'pg';
import { AUDIT_ACTIONS, READ_METHODS, REFUSED_READ_ACTION, SIGN_IN_ACTION } from '../audit/actions.js';
import { auditDetail } from '../audit/detail.js';
import { type AuditScope, auditScope } from '../audit/scope.js';
import { type AuditEntryInput, appendAuditEntry } from '../audit/trail.js';
import { tenantKey } from '../auth/principal.js';
import { userTenantByName } from '../auth/users.js';
import { type CommitHook, commitScope } from '../db/commit-scope.js';
import { type AppEnv, clientAddress } from './context.js';
import { routeLabel, UNMATCHED_ROUTE } from './route-label.js';

/**
 * The audit trail of requests (contract section 13): every state-changing request that passed authentication,
 * every sign-in and every refusal gets one entry. A request that commits a transaction writes its entry in the
 * first one, just before its COMMIT (src/db/pool.ts withTransaction), with the status its route answers on
 * success as the outcome: the entry and the change commit together, or neither does. A request that committed
 * none (a refusal, a failed validation, a change made in one statement or only in Temporal) gets its entry
 * alone, after its answer, with the status it answered.
 *
 * `successStatus` gives a route's status on success (from the OpenAPI document; the console's forms answer 303).
 */
export function auditTrail(pool: pg.Pool, successStatus: (method: string, route: string) => number | undefined) {
  return createMiddleware<AppEnv>(async (c, next) => {
    let written = false;
    let over = false;
    const scope: AuditScope = { notes: {} };
    const hook: CommitHook = {
      beforeCommit: async (client) => {
        if (written || over || READ_METHODS.has(c.req.method)) return;
        const entry = await entryOf(c, scope, successStatus(c.req.method, routeLabel(c)) ?? 200, client);
        if (!entry) return;
        await appendAuditEntry(client, entry);
        written = true;
        c.get('deps').metrics?.auditEntryWritten();
      },
    };
    try {
      await auditScope.run(scope, () => commitScope.run(hook, next));
    } finally {
      over = true;
    }
    if (written) return;
    const status = c.res.status;
    const entry = await entryOf(c, scope, status, pool);
    // Written whatever became of the client: a refusal is recorded even when no one reads its answer.
    if (!entry) return;
    // One statement: atomic without a transaction of its own.
    await appendAuditEntry(pool, entry);
    c.get('deps').metrics?.auditEntryWritten();
  });
}

/** The entry of a request (undefined: nothing to record), with `outcome` as its status. */
async function entryOf(
  c: Context<AppEnv>,
  scope: AuditScope,
  outcome: number,
  db: Pick<pg.Pool, 'query'>,
): Promise<AuditEntryInput | undefined> {
  const method = c.req.method;
  const route = routeLabel(c);
  const known = AUDIT_ACTIONS[`${method} ${route}`];
  const identity = c.get('identity');
  const principal = identity && 'principal' in identity ? identity.principal : undefined;
  const { notes } = scope;
  const common = {
    outcome,
    traceId: c.get('traceId') ?? c.get('requestId') ?? null,
    address: clientAddress(c),
  };
  if (known?.action === SIGN_IN_ACTION) {
    const body = (scope.body ?? {}) as Record<string, unknown>;
    const tried = typeof body.username === 'string' ? body.username.slice(0, 200) : null;
    const named = notes.tenantKey === undefined && tried ? await userTenantByName(db, tried) : undefined;
    return {
      ...common,
      tenantKey: notes.tenantKey ?? named?.tenantKey ?? '',
      actor: notes.actor ?? { kind: 'anonymous', id: null, name: tried },
      action: notes.signedIn ? SIGN_IN_ACTION : `${SIGN_IN_ACTION}.fail`,
      target: { kind: 'user', id: notes.targetId ?? named?.id ?? null },
      detail: auditDetail(scope.body),
    };
  }
  // Beyond sign-ins, only what a principal asked is recorded (a request whose credentials failed names no one).
  if (!principal) return undefined;
  const base = {
    ...common,
    tenantKey: tenantKey(principal.tenantId),
    actor: { kind: principal.kind === 'user' ? 'user' : 'apiKey', id: principal.id, name: principal.name } as const,
  };
  if (READ_METHODS.has(method)) {
    if (outcome !== 403) return undefined;
    return {
      ...base,
      action: REFUSED_READ_ACTION,
      target: { kind: null, id: null },
      detail: { method, route, path: c.req.path.slice(0, 500) },
    };
  }
  if (route === UNMATCHED_ROUTE) return undefined;
  const param = known?.param ? c.req.param(known.param) : undefined;
  return {
    ...base,
    action: notes.action ?? known?.action ?? `${method} ${route}`,
    target: { kind: known?.target ?? null, id: param ?? notes.targetId ?? null },
    detail: auditDetail(scope.body),
  };
}

/** Each documented operation's status on success (its lowest 2xx), by `METHOD /path/{param}`. */
export function successStatuses(definitions: readonly { type: string; route?: unknown }[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const d of definitions) {
    if (d.type !== 'route') continue;
    const route = d.route as { method: string; path: string; responses?: Record<string, unknown> };
    const codes = Object.keys(route.responses ?? {})
      .map(Number)
      .filter((n) => n >= 200 && n < 300)
      .sort((a, b) => a - b);
    if (codes[0] !== undefined) out.set(`${route.method.toUpperCase()} ${route.path}`, codes[0]);
  }
  return out;
}
