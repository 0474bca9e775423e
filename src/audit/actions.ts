/**
 * What each state-changing route records in the audit trail: the action's name and the kind of its target (with
 * the path parameter that names it, where one does). One table for the API and the console, keyed by method and
 * route template as the OpenAPI document writes it; a test walks the OpenAPI document and the console's routes
 * and fails for a state-changing route that is missing here.
 */
export interface AuditAction {
  action: string;
  target: string;
  /** The path parameter that names the target; a create names it from the code that made it. */
  param?: string;
}

const plan = (action: string, param?: string): AuditAction => ({
  action: `plan.${action}`,
  target: 'plan',
  ...(param ? { param } : {}),
});

/** The plan commands, by the last part of their path: the same action through the API and the console. */
const PLAN_COMMANDS: Record<string, string> = {
  approve: 'approve',
  reject: 'reject',
  cancel: 'cancel',
  pause: 'pause',
  resume: 'resume',
  'retry-failed': 'retryFailed',
  revert: 'revert',
};

export const AUDIT_ACTIONS: Readonly<Record<string, AuditAction>> = {
  'POST /alterations/submit': plan('submit'),
  'POST /alterations/run': plan('run'),
  'POST /alterations/dry-run': plan('dryRun'),
  'POST /alterations/preview': plan('preview'),
  'POST /alterations/workflows/retry': { action: 'instance.retry', target: 'instance' },
  'PATCH /alterations/{planId}/rollout': plan('rollout', 'planId'),
  ...Object.fromEntries(
    Object.entries(PLAN_COMMANDS).map(([path, name]) => [`POST /alterations/{planId}/${path}`, plan(name, 'planId')]),
  ),
  'PUT /alterations/policy': { action: 'policy.update', target: 'policy' },
  'POST /connection-configuration': { action: 'connection.create', target: 'connection' },
  'PUT /connection-configuration/{id}': { action: 'connection.update', target: 'connection', param: 'id' },
  'DELETE /connection-configuration/{id}': { action: 'connection.delete', target: 'connection', param: 'id' },
  'POST /events/{eventName}/trigger': { action: 'event.trigger', target: 'event', param: 'eventName' },
  'POST /identity/api-keys': { action: 'apiKey.create', target: 'apiKey' },
  'DELETE /identity/api-keys/{id}': { action: 'apiKey.delete', target: 'apiKey', param: 'id' },
  'POST /identity/users': { action: 'user.create', target: 'user' },
  'DELETE /identity/users/{id}': { action: 'user.delete', target: 'user', param: 'id' },
  'POST /identity/roles': { action: 'role.create', target: 'role' },
  'POST /identity/secrets/hash': { action: 'secret.hash', target: 'secret' },
  'POST /identity/login': { action: 'signIn', target: 'user' },
  'POST /identity/refresh': { action: 'token.refresh', target: 'user' },
  'POST /identity/logout': { action: 'signOut', target: 'user' },
  'POST /workflow-definitions': { action: 'definition.publish', target: 'definition' },
  'POST /workflow-instances': { action: 'instance.start', target: 'instance' },

  // The console's forms: the API's actions under the console's paths.
  'POST /console/sign-in': { action: 'signIn', target: 'user' },
  'POST /console/sign-out': { action: 'signOut', target: 'user' },
  // Which of its buttons was pressed names the action (dry run, preview, submit, or a draft of the form).
  'POST /console/new-plan': plan('submit'),
  'POST /console/new-plan/json': plan('draft'),
  'POST /console/plans/{planId}/rollout': plan('rollout', 'planId'),
  ...Object.fromEntries(
    Object.entries(PLAN_COMMANDS).map(([path, name]) => [`POST /console/plans/{planId}/${path}`, plan(name, 'planId')]),
  ),
};

/** The routes whose every request is recorded, signed in or not: sign-ins (`signIn`, or `signIn.fail`). */
export const SIGN_IN_ACTION = 'signIn';

/** A refused request to a route that changes nothing (a read): recorded as this action, with what it asked. */
export const REFUSED_READ_ACTION = 'permission.refuse';

/** Methods that change nothing: recorded only when refused. */
export const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
