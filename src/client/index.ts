import type { z } from 'zod';
import type { AlterationSchema, FilterSchema, RolloutPatchSchema, RolloutSchema } from '../alterations/model.js';
import type { ApprovalPolicy } from '../alterations/governance.js';
import type { ScheduleSchema } from '../alterations/schedule.js';
import type { MigrationDraft } from '../engine/migration-draft.js';
import type {
  InstanceChange,
  JobView,
  PlanSummaryView,
  PlanView,
  PreviewItem,
  RunResultView,
} from '../alterations/views.js';
import type { ConnectionRequestSchema, ConnectionSchema } from '../connections/views.js';
import type { DefinitionSchema, DefinitionSummarySchema } from '../engine/definition-views.js';
import type { WorkflowDefinitionRequestSchema } from '../engine/definition-schema.js';
import type { ActivityCountsSchema, IncidentGroup, InstanceSummary, InstanceView } from '../engine/instance-views.js';
import type { ApiKeyView } from '../auth/api-keys.js';
import type { AuditEntry } from '../audit/trail.js';
import type { StoredUserView, UserView } from '../auth/users.js';
import { connectionError, ProblemError, type RequestInfo, UnexpectedAnswerError } from './errors.js';
import * as shapes from './shapes.js';
import { MalformedEventError, type PlanEvent, readServerSentEvents } from './sse.js';

export { ConnectionError, type ConnectionFailure, ProblemError, UnexpectedAnswerError } from './errors.js';

/**
 * A typed client for the whole HTTP API, for TypeScript projects and the `wfa` CLI:
 * `import { createClient } from 'workflow-alterations/client'`. Its types are inferred from the same zod
 * schemas the service validates and documents with, so they cannot drift from `/openapi.json`.
 */

export type Alteration = z.input<typeof AlterationSchema>;
export type Filter = z.input<typeof FilterSchema>;
export type Rollout = z.input<typeof RolloutSchema>;
export type Schedule = z.input<typeof ScheduleSchema>;
export type { ApprovalPolicy, MigrationDraft };
export type RolloutPatch = z.input<typeof RolloutPatchSchema>;
export type DefinitionRequest = z.input<typeof WorkflowDefinitionRequestSchema>;
export type Definition = z.infer<typeof DefinitionSchema>;
export type DefinitionSummary = z.infer<typeof DefinitionSummarySchema>;
export type ConnectionRequest = z.input<typeof ConnectionRequestSchema>;
export type Connection = z.infer<typeof ConnectionSchema>;
export type ActivityCounts = z.infer<typeof ActivityCountsSchema>;
export type { IncidentGroup, InstanceChange };
export type {
  InstanceSummary,
  InstanceView,
  JobView,
  PlanEvent,
  PlanSummaryView,
  PlanView,
  PreviewItem,
  RunResultView,
};

export type { AuditEntry };
/** What `GET /audit` selects: an actor's id or name, an action or family (`plan.*`), a target, a time range. */
export interface AuditQuery {
  actor?: string | undefined;
  action?: string | undefined;
  targetId?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  tenantId?: string | undefined;
  after?: string | undefined;
  limit?: number | undefined;
}
export type AuditVerification = { ok: boolean; checked: number; firstBrokenSeq: number | null };

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
}

export interface ClientOptions {
  /** The service's base URL, e.g. http://localhost:3000 */
  baseUrl: string;
  /** `Authorization: ApiKey …` */
  apiKey?: string | undefined;
  /** `Authorization: Bearer …` (from `identity.login`) */
  accessToken?: string | undefined;
  fetch?: typeof fetch;
  /** A request (not an event stream) that has not fully answered within this many ms fails; none by default. */
  timeoutMs?: number | undefined;
  /** An answer larger than this many bytes fails instead of filling memory; no limit by default. */
  maxResponseBytes?: number | undefined;
  /** An event stream that sends nothing (not even its keep-alive) for this many ms fails; none by default. */
  streamIdleTimeoutMs?: number | undefined;
}

type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

/**
 * Why `url` cannot be a base URL (no http or https scheme, a query, credentials in it), or undefined when it
 * can. `localhost:3000` parses as a URL of the scheme `localhost:`, so the scheme is checked by name.
 */
export function baseUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'it is not a URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'it does not start with http:// or https://';
  if (parsed.username || parsed.password) return 'it has a user name or password in it (give credentials apart)';
  if (parsed.search || parsed.hash) return 'it has a query or fragment (give the base URL only)';
  return undefined;
}

export function createClient(options: ClientOptions) {
  const base = options.baseUrl.replace(/\/+$/, '');
  const invalid = baseUrlProblem(base);
  if (invalid) throw new TypeError(`Invalid baseUrl ${JSON.stringify(options.baseUrl)}: ${invalid}`);
  const doFetch = options.fetch ?? fetch;
  const auth = (): Record<string, string> =>
    options.accessToken
      ? { authorization: `Bearer ${options.accessToken}` }
      : options.apiKey
        ? { authorization: `ApiKey ${options.apiKey}` }
        : {};

  const url = (path: string, query?: Query) => {
    const u = new URL(base + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v === undefined) continue;
      for (const item of Array.isArray(v) ? v : [v]) u.searchParams.append(k, String(item));
    }
    return u.toString();
  };

  /**
   * One request: its answer checked against `shape` (null: no body is expected), within timeoutMs and
   * maxResponseBytes; a failure is a ProblemError, a ConnectionError or an UnexpectedAnswerError.
   */
  async function call<T>(
    method: string,
    path: string,
    shape: z.ZodType | null,
    opts: { body?: unknown; query?: Query; signal?: AbortSignal; headers?: (h: Headers) => void } = {},
  ): Promise<T> {
    const request: RequestInfo = { baseUrl: base, method, path };
    const headers: Record<string, string> = { accept: 'application/json', ...auth() };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const signals = [opts.signal, options.timeoutMs ? AbortSignal.timeout(options.timeoutMs) : undefined].filter(
      (x): x is AbortSignal => x !== undefined,
    );
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    try {
      const res = await doFetch(url(path, opts.query), {
        method,
        headers,
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
        ...(signal ? { signal } : {}),
      });
      const decoded = await decode<T>(res, request, shape, options.maxResponseBytes);
      opts.headers?.(res.headers);
      return decoded;
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      throw connectionError(err, request, options.timeoutMs);
    }
  }

  /** The plan's event stream, opened within timeoutMs; then its events, checked, within streamIdleTimeoutMs. */
  async function* planEvents(planId: string, signal?: AbortSignal): AsyncGenerator<PlanEvent> {
    const request: RequestInfo = { baseUrl: base, method: 'GET', path: `/alterations/${seg(planId)}/events` };
    const opening = new AbortController();
    const timer = options.timeoutMs ? setTimeout(() => opening.abort(timeoutReason()), options.timeoutMs) : undefined;
    let res: Response;
    try {
      res = await doFetch(url(request.path), {
        headers: { accept: 'text/event-stream', ...auth() },
        signal: signal ? AbortSignal.any([signal, opening.signal]) : opening.signal,
      });
      if (!res.ok || !res.body) await decode(res, request, null, options.maxResponseBytes);
      if (contentTypeOf(res) !== 'text/event-stream') {
        await res.body?.cancel().catch(() => undefined);
        throw new UnexpectedAnswerError(request, res.status, contentTypeOf(res), 'not an event stream');
      }
    } catch (err) {
      if (signal?.aborted) throw err;
      throw connectionError(err, request, options.timeoutMs);
    } finally {
      clearTimeout(timer);
    }
    const stream = readServerSentEvents(res.body!, {
      ...(options.streamIdleTimeoutMs ? { idleTimeoutMs: options.streamIdleTimeoutMs } : {}),
      ...(options.maxResponseBytes ? { maxEventBytes: options.maxResponseBytes } : {}),
    });
    try {
      for await (const e of stream) {
        // An event this client does not know (a newer service's) is skipped; the known ones are checked.
        const shape = e.event === 'progress' ? shapes.progressEvent : e.event === 'done' ? shapes.doneEvent : null;
        if (!shape) continue;
        const wrong = shapes.mismatch(shape, e.data);
        if (wrong)
          throw new UnexpectedAnswerError(request, res.status, 'text/event-stream', `${e.event} event: ${wrong}`);
        yield e;
      }
    } catch (err) {
      if (err instanceof MalformedEventError)
        throw new UnexpectedAnswerError(request, res.status, 'text/event-stream', err.message);
      throw err;
    }
  }

  /**
   * A streamed answer (an export), its chunks as they arrive: opened within timeoutMs, then read without a bound on
   * its size (an export of a million jobs is large); a refusal is the ProblemError it answered.
   */
  async function* download(path: string, query: Query, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
    const request: RequestInfo = { baseUrl: base, method: 'GET', path };
    const opening = new AbortController();
    const timer = options.timeoutMs ? setTimeout(() => opening.abort(timeoutReason()), options.timeoutMs) : undefined;
    let res: Response;
    try {
      res = await doFetch(url(path, query), {
        headers: auth(),
        signal: signal ? AbortSignal.any([signal, opening.signal]) : opening.signal,
      });
      if (!res.ok || !res.body) await decode(res, request, null, options.maxResponseBytes);
    } catch (err) {
      if (signal?.aborted) throw err;
      throw connectionError(err, request, options.timeoutMs);
    } finally {
      clearTimeout(timer);
    }
    yield* res.body as unknown as AsyncIterable<Uint8Array>;
  }

  const seg = encodeURIComponent;

  return {
    baseUrl: base,
    health: () => call<{ status: string; checks: Record<string, string> }>('GET', '/health', shapes.health),

    definitions: {
      publish: (definition: DefinitionRequest) =>
        call<Definition>('POST', '/workflow-definitions', shapes.definition, { body: definition }),
      get: (definitionId: string, version?: number) =>
        call<Definition>('GET', `/workflow-definitions/${seg(definitionId)}`, shapes.definition, {
          query: { version },
        }),
      /** A page of the latest versions as summaries (`get` one for its flowchart). */
      list: (opts: { after?: string | undefined; limit?: number | undefined } = {}) =>
        call<Page<DefinitionSummary> & { totalCount: number }>('GET', '/workflow-definitions', shapes.definitionList, {
          query: { after: opts.after, limit: opts.limit },
        }),
      /** A first draft of a Migrate's activityMappings from version `from` to `to`, to edit. */
      /** How many of a version's unfinished instances wait on, have scheduled, or faulted at each activity. */
      activityCounts: (definitionId: string, version?: number) =>
        call<ActivityCounts>(
          'GET',
          `/workflow-definitions/${seg(definitionId)}/activity-counts`,
          shapes.activityCounts,
          { query: { version } },
        ),
      migrationDraft: (definitionId: string, from: number, to: number) =>
        call<MigrationDraft>(
          'GET',
          `/workflow-definitions/${seg(definitionId)}/migration-draft`,
          shapes.migrationDraft,
          { query: { from, to } },
        ),
    },

    instances: {
      start: (body: {
        definitionId: string;
        version?: number;
        name?: string;
        correlationId?: string;
        variables?: Record<string, unknown>;
      }) => call<{ workflowInstanceId: string }>('POST', '/workflow-instances', shapes.started, { body }),
      get: (id: string) => call<InstanceView>('GET', `/workflow-instances/${seg(id)}`, shapes.instance),
      list: (
        query: {
          definitionId?: string;
          status?: string;
          subStatus?: string;
          correlationId?: string;
          searchTerm?: string;
          after?: string;
          limit?: number;
        } = {},
      ) => call<Page<InstanceSummary>>('GET', '/workflow-instances', shapes.instancePage, { query }),
      /** The open incidents grouped by definition, version, activity and message, largest group first. */
      incidents: (query: { definitionId?: string; after?: string; limit?: number } = {}) =>
        call<Page<IncidentGroup>>('GET', '/workflow-instances/incidents', shapes.incidentGroupPage, { query }),
      /** Every plan's job that touched the instance, newest first. */
      changes: (id: string, query: { after?: string; limit?: number } = {}) =>
        call<Page<InstanceChange>>('GET', `/workflow-instances/${seg(id)}/alterations`, shapes.instanceChangePage, {
          query,
        }),
      /** `resumption`: `inline` (resumed before the answer) or `recorded` (the workers resume them next). */
      trigger: async (eventName: string, body: { correlationId?: string; workflowInstanceId?: string } = {}) => {
        let resumption: string | null = null;
        const r = await call<{ resumedWorkflowInstanceIds: string[] }>(
          'POST',
          `/events/${seg(eventName)}/trigger`,
          shapes.triggered,
          { body, headers: (h) => (resumption = h.get('wfa-resumption')) },
        );
        return { ...r, resumption: resumption === 'recorded' ? ('recorded' as const) : ('inline' as const) };
      },
    },

    plans: {
      submit: (body: {
        id?: string;
        alterations: Alteration[];
        filter: Filter;
        rollout?: Rollout;
        /** Ask for a second principal's approval whatever the tenant's policy says. */
        approval?: { required: true };
        /** Not before a moment, and only inside maintenance windows. */
        schedule?: Schedule;
        /** Each changed instance must come to match `expect` within `withinSeconds` of its job. */
        verify?: { expect: Filter; withinSeconds: number };
      }) => call<{ planId: string }>('POST', '/alterations/submit', shapes.planId, { body }),
      dryRun: (filter: Filter) =>
        call<{ workflowInstanceIds: string[] }>('POST', '/alterations/dry-run', shapes.dryRun, { body: filter }),
      /** How many instances the filter selects, without their ids. */
      count: (filter: Filter) =>
        call<{ count: number }>('POST', '/alterations/dry-run', shapes.count, {
          body: filter,
          query: { countOnly: 'true' },
        }),
      /** What the plan would do to the first `limit` matched instances; nothing is written. */
      preview: (body: { alterations: Alteration[]; filter: Filter; limit?: number }) =>
        call<{ matchedCount: number; items: PreviewItem[] }>('POST', '/alterations/preview', shapes.preview, { body }),
      get: (planId: string, opts: { signal?: AbortSignal } = {}) =>
        call<{ plan: PlanView; jobs: JobView[] }>('GET', `/alterations/${seg(planId)}`, shapes.planWithJobs, opts),
      /** Plan summaries (without their filters), newest first; `limit` 1 to 100 (default 20). */
      list: (query: { status?: number | string; after?: string; limit?: number } = {}) =>
        call<Page<PlanSummaryView>>('GET', '/alterations', shapes.planPage, { query }),
      jobs: (planId: string, query: { status?: number | string; after?: string; limit?: number } = {}) =>
        call<Page<JobView>>('GET', `/alterations/${seg(planId)}/jobs`, shapes.jobPage, { query }),
      /** Every job of the plan as NDJSON or CSV, streamed (a record to keep before the retention purges it). */
      exportJobs: (
        planId: string,
        format: 'ndjson' | 'csv',
        query: { status?: number | string } = {},
        signal?: AbortSignal,
      ) => download(`/alterations/${seg(planId)}/jobs`, { ...query, format }, signal),
      cancel: (planId: string) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/cancel`, shapes.planState),
      /** Batches in flight finish, none starts until resumed (status Paused 7). */
      pause: (planId: string) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/pause`, shapes.planState),
      /** `ignoreSchedule`: run now, outside its windows too, to its end (its schedule dropped). */
      resume: (planId: string, body: { ignoreSchedule?: boolean } = {}) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/resume`, shapes.planState, {
          body,
        }),
      /** Approve a plan awaiting approval (status 8); never the submitter's own. */
      approve: (planId: string, body: { comment?: string } = {}) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/approve`, shapes.planState, {
          body,
        }),
      /** Reject a plan awaiting approval: Cancelled, no job. */
      reject: (planId: string, body: { comment?: string } = {}) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/reject`, shapes.planState, {
          body,
        }),
      /** What a stored plan would do now to its first `limit` matched instances (for its approver). */
      previewStored: (planId: string, limit?: number) =>
        call<{ matchedCount: number; items: PreviewItem[] }>(
          'GET',
          `/alterations/${seg(planId)}/preview`,
          shapes.preview,
          { query: { limit } },
        ),
      /** Change the rate or failure ratio of a running or paused plan (null removes one). */
      rollout: (planId: string, body: RolloutPatch) =>
        call<PlanView>('PATCH', `/alterations/${seg(planId)}/rollout`, shapes.plan, { body }),
      /** A new plan that restores what a finished plan changed (instances changed since are left alone). */
      revert: (planId: string, body: { id?: string } = {}) =>
        call<{ planId: string }>('POST', `/alterations/${seg(planId)}/revert`, shapes.planId, { body }),
      /** A new plan over what a finished plan did not get done (its failed jobs' instances). */
      retryFailed: (planId: string, body: { id?: string; include?: ('Failed' | 'Unverified')[] } = {}) =>
        call<{ planId: string }>('POST', `/alterations/${seg(planId)}/retry-failed`, shapes.planId, { body }),
      run: (workflowInstanceIds: string[], alterations: Alteration[]) =>
        call<{ results: RunResultView[] }>('POST', '/alterations/run', shapes.results, {
          body: { workflowInstanceIds, alterations },
        }),
      retry: (workflowInstanceIds: string[], activityIds?: string[]) =>
        call<{ results: RunResultView[] }>('POST', '/alterations/workflows/retry', shapes.results, {
          body: { workflowInstanceIds, ...(activityIds ? { activityIds } : {}) },
        }),
      /** The plan's live events (`progress` …, then `done`); ends after `done`, or when `signal` aborts. */
      events: planEvents,
    },

    /** Who did what, provably (docs/audit.md). */
    audit: {
      /** A page of the trail, newest first. */
      list: (q: AuditQuery = {}) => call<Page<AuditEntry>>('GET', '/audit', shapes.auditPage, { query: { ...q } }),
      /** Recomputes the tenant's hash chain. */
      verify: (tenantId?: string) =>
        call<AuditVerification>('GET', '/audit/verify', shapes.auditVerification, { query: { tenantId } }),
      /** Every entry of the selection as NDJSON, streamed. */
      export: (q: Omit<AuditQuery, 'after' | 'limit'> = {}, signal?: AbortSignal) =>
        download('/audit', { ...q, format: 'ndjson' }, signal),
    },

    /** The tenant's approval policy (section "Change management" of the README). */
    policy: {
      get: () => call<ApprovalPolicy>('GET', '/alterations/policy', shapes.policy),
      put: (policy: ApprovalPolicy) =>
        call<ApprovalPolicy>('PUT', '/alterations/policy', shapes.policy, { body: policy }),
    },

    connections: {
      list: () =>
        call<{ items: Connection[]; totalCount: number }>('GET', '/connection-configuration', shapes.connectionList),
      get: (id: string) => call<Connection>('GET', `/connection-configuration/${seg(id)}`, shapes.connection),
      create: (body: ConnectionRequest) =>
        call<Connection>('POST', '/connection-configuration', shapes.connection, { body }),
      update: (id: string, body: ConnectionRequest) =>
        call<Connection>('PUT', `/connection-configuration/${seg(id)}`, shapes.connection, { body }),
      delete: (id: string) => call<void>('DELETE', `/connection-configuration/${seg(id)}`, null),
    },

    identity: {
      login: (username: string, password: string) =>
        call<TokenPair>('POST', '/identity/login', shapes.tokens, { body: { username, password } }),
      refresh: (refreshToken: string) =>
        call<TokenPair>('POST', '/identity/refresh', shapes.tokens, { body: { refreshToken } }),
      logout: (refreshToken?: string) =>
        call<void>('POST', '/identity/logout', null, { body: refreshToken ? { refreshToken } : {} }),
      createApiKey: (body: { name: string; permissions: string[]; tenantId?: string | null; expiresAt?: string }) =>
        call<{ id: string; key: string; name: string; permissions: string[] }>(
          'POST',
          '/identity/api-keys',
          shapes.apiKey,
          { body },
        ),
      listApiKeys: () =>
        call<{ items: ApiKeyView[]; totalCount: number }>('GET', '/identity/api-keys', shapes.apiKeyList),
      revokeApiKey: (id: string) => call<void>('DELETE', `/identity/api-keys/${seg(id)}`, null),
      createUser: (body: {
        name: string;
        password: string;
        permissions?: string[];
        roles?: string[];
        tenantId?: string | null;
      }) => call<UserView>('POST', '/identity/users', shapes.user, { body }),
      listUsers: () => call<{ items: StoredUserView[]; totalCount: number }>('GET', '/identity/users', shapes.userList),
      deleteUser: (id: string) => call<void>('DELETE', `/identity/users/${seg(id)}`, null),
      permissions: () =>
        call<{ model: string; permissions: string[]; wildcards: string[] }>(
          'GET',
          '/identity/permissions',
          shapes.anyObject,
        ),
    },
  };
}

export type Client = ReturnType<typeof createClient>;

const timeoutReason = () => new DOMException('The operation timed out.', 'TimeoutError');

/** The media type of an answer, without its parameters ("text/html"), or "no content type". */
function contentTypeOf(res: Response): string {
  return res.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase() || 'no content type';
}

/**
 * The JSON of a 2xx answer that has `shape` (null: an empty body or any JSON), a ProblemError for the
 * service's problem+json, or an UnexpectedAnswerError for anything else (another server answered).
 */
async function decode<T>(res: Response, request: RequestInfo, shape: z.ZodType | null, maxBytes?: number): Promise<T> {
  const text = await readText(res, maxBytes);
  const json = parseJson(text);
  const unexpected = (reason: string) => new UnexpectedAnswerError(request, res.status, contentTypeOf(res), reason);
  if (!res.ok) throw problemOf(json) ?? unexpected(notAProblem(res.status, text, json, contentTypeOf(res)));
  if (shape === null && text.trim() === '') return undefined as T;
  if (!json) throw unexpected(notJson(text, contentTypeOf(res)));
  const wrong = shape ? shapes.mismatch(shape, json.value) : undefined;
  if (wrong) throw unexpected(wrong);
  return json.value as T;

  function problemOf(parsed: { value: unknown } | undefined): ProblemError | undefined {
    const p = parsed?.value as Record<string, unknown> | undefined;
    if (!p || typeof p !== 'object' || Array.isArray(p)) return undefined;
    if (typeof p.detail !== 'string' && typeof p.title !== 'string') return undefined;
    const title = typeof p.title === 'string' ? p.title : res.statusText;
    const detail = typeof p.detail === 'string' ? p.detail : title;
    const errors = Array.isArray(p.errors)
      ? p.errors.filter(
          (e): e is { path: string; message: string } =>
            typeof e?.path === 'string' && typeof (e as { message?: unknown }).message === 'string',
        )
      : [];
    return new ProblemError(res.status, title, detail, errors, p);
  }
}

function notAProblem(status: number, text: string, json: { value: unknown } | undefined, contentType: string): string {
  if (status === 502 || status === 503 || status === 504)
    return 'a gateway or proxy answered: the service behind it may be down';
  if (json) return 'JSON that is not a problem document';
  return notJson(text, contentType);
}

function notJson(text: string, contentType: string): string {
  if (text.trim() === '') return 'an empty body';
  return contentType === 'text/html' || /^\s*<(!doctype|html)/i.test(text) ? 'an HTML page' : 'not JSON';
}

function parseJson(text: string): { value: unknown } | undefined {
  if (text.trim() === '') return undefined;
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

/** The body as text, failing once it passes `maxBytes` (the rest is not read). */
async function readText(res: Response, maxBytes?: number): Promise<string> {
  if (!maxBytes || !res.body) return res.text();
  const declared = Number(res.headers.get('content-length'));
  if (declared > maxBytes) {
    await res.body.cancel().catch(() => undefined);
    throw new Error(`The answer is ${declared} bytes, more than the ${maxBytes} this client reads`);
  }
  const decoder = new TextDecoder();
  let size = 0;
  let text = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > maxBytes) {
      await res.body.cancel().catch(() => undefined);
      throw new Error(`The answer is larger than the ${maxBytes} bytes this client reads`);
    }
    text += decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}
