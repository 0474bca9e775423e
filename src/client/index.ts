import type { z } from 'zod';
import type { AlterationSchema, FilterSchema, RolloutPatchSchema, RolloutSchema } from '../alterations/model.js';
import type { JobView, PlanSummaryView, PlanView, PreviewItem, RunResultView } from '../alterations/views.js';
import type { ConnectionRequestSchema, ConnectionSchema } from '../connections/views.js';
import type { DefinitionSchema } from '../engine/definition-views.js';
import type { WorkflowDefinitionRequestSchema } from '../engine/definition-schema.js';
import type { InstanceSummary, InstanceView } from '../engine/instance-views.js';
import { type PlanEvent, readServerSentEvents } from './sse.js';

/**
 * A typed client for the whole HTTP API, for TypeScript projects and the `wfa` CLI:
 * `import { createClient } from 'workflow-alterations/client'`. Its types are inferred from the same zod
 * schemas the service validates and documents with, so they cannot drift from `/openapi.json`.
 */

export type Alteration = z.input<typeof AlterationSchema>;
export type Filter = z.input<typeof FilterSchema>;
export type Rollout = z.input<typeof RolloutSchema>;
export type RolloutPatch = z.input<typeof RolloutPatchSchema>;
export type DefinitionRequest = z.input<typeof WorkflowDefinitionRequestSchema>;
export type Definition = z.infer<typeof DefinitionSchema>;
export type ConnectionRequest = z.input<typeof ConnectionRequestSchema>;
export type Connection = z.infer<typeof ConnectionSchema>;
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

/** A problem+json answer (RFC 9457): `detail` says what is wrong, `errors` names each field. */
export class ProblemError extends Error {
  override name = 'ProblemError';
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly errors: { path: string; message: string }[] = [],
  ) {
    super(detail || title);
  }
}

type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

export function createClient(options: ClientOptions) {
  const base = options.baseUrl.replace(/\/+$/, '');
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

  async function call<T>(
    method: string,
    path: string,
    opts: { body?: unknown; query?: Query; signal?: AbortSignal } = {},
  ): Promise<T> {
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
      return await decode<T>(res, options.maxResponseBytes);
    } catch (err) {
      if ((err as Error).name === 'TimeoutError')
        throw new Error(`${method} ${path} did not answer within ${options.timeoutMs} ms`, { cause: err });
      throw err;
    }
  }

  const seg = encodeURIComponent;

  return {
    baseUrl: base,
    health: () => call<{ status: string; checks: Record<string, string> }>('GET', '/health'),

    definitions: {
      publish: (definition: DefinitionRequest) =>
        call<Definition>('POST', '/workflow-definitions', { body: definition }),
      get: (definitionId: string, version?: number) =>
        call<Definition>('GET', `/workflow-definitions/${seg(definitionId)}`, { query: { version } }),
      list: () => call<{ items: Definition[]; totalCount: number }>('GET', '/workflow-definitions'),
    },

    instances: {
      start: (body: {
        definitionId: string;
        version?: number;
        name?: string;
        correlationId?: string;
        variables?: Record<string, unknown>;
      }) => call<{ workflowInstanceId: string }>('POST', '/workflow-instances', { body }),
      get: (id: string) => call<InstanceView>('GET', `/workflow-instances/${seg(id)}`),
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
      ) => call<Page<InstanceSummary>>('GET', '/workflow-instances', { query }),
      trigger: (eventName: string, body: { correlationId?: string; workflowInstanceId?: string } = {}) =>
        call<{ resumedWorkflowInstanceIds: string[] }>('POST', `/events/${seg(eventName)}/trigger`, { body }),
    },

    plans: {
      submit: (body: { id?: string; alterations: Alteration[]; filter: Filter; rollout?: Rollout }) =>
        call<{ planId: string }>('POST', '/alterations/submit', { body }),
      dryRun: (filter: Filter) =>
        call<{ workflowInstanceIds: string[] }>('POST', '/alterations/dry-run', { body: filter }),
      /** How many instances the filter selects, without their ids. */
      count: (filter: Filter) =>
        call<{ count: number }>('POST', '/alterations/dry-run', { body: filter, query: { countOnly: 'true' } }),
      /** What the plan would do to the first `limit` matched instances; nothing is written. */
      preview: (body: { alterations: Alteration[]; filter: Filter; limit?: number }) =>
        call<{ matchedCount: number; items: PreviewItem[] }>('POST', '/alterations/preview', { body }),
      get: (planId: string) => call<{ plan: PlanView; jobs: JobView[] }>('GET', `/alterations/${seg(planId)}`),
      /** Plan summaries (without their filters), newest first; `limit` 1 to 100 (default 20). */
      list: (query: { status?: number | string; after?: string; limit?: number } = {}) =>
        call<Page<PlanSummaryView>>('GET', '/alterations', { query }),
      jobs: (planId: string, query: { status?: number | string; after?: string; limit?: number } = {}) =>
        call<Page<JobView>>('GET', `/alterations/${seg(planId)}/jobs`, { query }),
      cancel: (planId: string) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/cancel`),
      /** Batches in flight finish, none starts until resumed (status Paused 7). */
      pause: (planId: string) => call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/pause`),
      resume: (planId: string) =>
        call<{ planId: string; status: number }>('POST', `/alterations/${seg(planId)}/resume`),
      /** Change the rate or failure ratio of a running or paused plan (null removes one). */
      rollout: (planId: string, body: RolloutPatch) =>
        call<PlanView>('PATCH', `/alterations/${seg(planId)}/rollout`, { body }),
      /** A new plan that restores what a finished plan changed (instances changed since are left alone). */
      revert: (planId: string, body: { id?: string } = {}) =>
        call<{ planId: string }>('POST', `/alterations/${seg(planId)}/revert`, { body }),
      run: (workflowInstanceIds: string[], alterations: Alteration[]) =>
        call<{ results: RunResultView[] }>('POST', '/alterations/run', { body: { workflowInstanceIds, alterations } }),
      retry: (workflowInstanceIds: string[], activityIds?: string[]) =>
        call<{ results: RunResultView[] }>('POST', '/alterations/workflows/retry', {
          body: { workflowInstanceIds, ...(activityIds ? { activityIds } : {}) },
        }),
      /** The plan's live events (`progress` …, then `done`); ends after `done`, or when `signal` aborts. */
      async *events(planId: string, signal?: AbortSignal): AsyncGenerator<PlanEvent> {
        // The answer's headers within timeoutMs; the stream after them is bounded by streamIdleTimeoutMs.
        const opening = new AbortController();
        const timer = options.timeoutMs ? setTimeout(() => opening.abort(), options.timeoutMs) : undefined;
        let res: Response;
        try {
          res = await doFetch(url(`/alterations/${seg(planId)}/events`), {
            headers: { accept: 'text/event-stream', ...auth() },
            signal: signal ? AbortSignal.any([signal, opening.signal]) : opening.signal,
          });
        } catch (err) {
          if (opening.signal.aborted)
            throw new Error(`GET /alterations/${planId}/events did not answer within ${options.timeoutMs} ms`, {
              cause: err,
            });
          throw err;
        } finally {
          clearTimeout(timer);
        }
        if (!res.ok || !res.body) await decode(res, options.maxResponseBytes);
        yield* readServerSentEvents(res.body!, {
          ...(options.streamIdleTimeoutMs ? { idleTimeoutMs: options.streamIdleTimeoutMs } : {}),
          ...(options.maxResponseBytes ? { maxEventBytes: options.maxResponseBytes } : {}),
        });
      },
    },

    connections: {
      list: () => call<{ items: Connection[]; totalCount: number }>('GET', '/connection-configuration'),
      get: (id: string) => call<Connection>('GET', `/connection-configuration/${seg(id)}`),
      create: (body: ConnectionRequest) => call<Connection>('POST', '/connection-configuration', { body }),
      update: (id: string, body: ConnectionRequest) =>
        call<Connection>('PUT', `/connection-configuration/${seg(id)}`, { body }),
      delete: (id: string) => call<void>('DELETE', `/connection-configuration/${seg(id)}`),
    },

    identity: {
      login: (username: string, password: string) =>
        call<TokenPair>('POST', '/identity/login', { body: { username, password } }),
      refresh: (refreshToken: string) => call<TokenPair>('POST', '/identity/refresh', { body: { refreshToken } }),
      logout: (refreshToken?: string) =>
        call<void>('POST', '/identity/logout', { body: refreshToken ? { refreshToken } : {} }),
      createApiKey: (body: { name: string; permissions: string[]; tenantId?: string | null; expiresAt?: string }) =>
        call<{ id: string; key: string; name: string; permissions: string[] }>('POST', '/identity/api-keys', { body }),
      listApiKeys: () =>
        call<{ items: { id: string; name: string; permissions: string[] }[]; totalCount: number }>(
          'GET',
          '/identity/api-keys',
        ),
      revokeApiKey: (id: string) => call<void>('DELETE', `/identity/api-keys/${seg(id)}`),
      permissions: () =>
        call<{ model: string; permissions: string[]; wildcards: string[] }>('GET', '/identity/permissions'),
    },
  };
}

export type Client = ReturnType<typeof createClient>;

/** The JSON of a 2xx answer (undefined for 204), or a ProblemError for anything else. */
async function decode<T>(res: Response, maxBytes?: number): Promise<T> {
  const text = await readText(res, maxBytes);
  const json = text ? safeJson(text) : undefined;
  if (res.ok) return json as T;
  const p = (json ?? {}) as { title?: string; detail?: string; errors?: { path: string; message: string }[] };
  throw new ProblemError(
    res.status,
    p.title ?? res.statusText,
    p.detail ?? (text.slice(0, 200) || `HTTP ${res.status}`),
    p.errors ?? [],
  );
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
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
