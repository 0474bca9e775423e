import { type RouteConfig, z } from '@hono/zod-openapi';
import type { PermissionSpec } from '../auth/permissions.js';
import { jsonBody, problems } from './schemas.js';
import { secureRoute } from './secure-route.js';

/** The plan a route under `/alterations/{planId}` is about. */
export const PlanParams = { params: z.object({ planId: z.string() }) };

/** What most commands on a plan answer: the plan, and the status it has now. */
export const PlanStatusAnswer = z.object({ planId: z.string(), status: z.number().int() });

/** What sets one route of a recurring shape apart from another: the shape gives the rest. */
interface RouteSpec<B extends z.ZodType, A extends RouteConfig['responses']> {
  tags: string[];
  summary: string;
  /** The JSON body, when the route takes one: its problems (400, 413, 415) come with it. */
  body?: B;
  /** The answers other than problems. */
  answer: A;
  /** The route creates or changes something that may clash with what is there (409). */
  conflict?: boolean;
}

/** A body's part of a route's request, typed as the handler reads it (`c.req.valid('json')`). */
type BodyPart<B extends z.ZodType> = [B] extends [z.ZodNever] ? object : ReturnType<typeof jsonBody<B>>;

/** A route of a recurring shape: its request and problems follow from its spec; nothing else is added. */
function shapedRoute<
  const M extends RouteConfig['method'],
  const P extends string,
  const R extends object,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType,
  const C extends 401 | 403 | 404,
>(permission: PermissionSpec, method: M, path: P, request: R, spec: RouteSpec<B, A>, codes: C[]) {
  return secureRoute(permission, {
    method,
    path,
    tags: spec.tags,
    summary: spec.summary,
    request: { ...request, ...((spec.body ? jsonBody(spec.body) : {}) as BodyPart<B>) },
    responses: {
      ...spec.answer,
      ...problems(...codes),
      ...(spec.conflict ? problems(409) : {}),
      ...(spec.body ? problems(400, 413, 415) : {}),
    },
  });
}

/**
 * A command on one plan, `/alterations/{planId}/<verb>`. Every such command (cancel, pause, resume, rollout,
 * revert, approve, reject) may find its plan unknown (404) or in a state it does not apply to (409): only its
 * permission, body and answer differ.
 */
export function planCommandRoute<
  const V extends string,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType = z.ZodNever,
  const M extends 'post' | 'patch' = 'post',
>(permission: PermissionSpec, verb: V, spec: RouteSpec<B, A> & { method?: M }) {
  const path = `/alterations/{planId}/${verb}` as const;
  const command = { ...spec, conflict: true };
  return shapedRoute(permission, spec.method ?? ('post' as M), path, PlanParams, command, [401, 403, 404]);
}

/**
 * A read, replacement or removal of one resource by its id (`/workflow-instances/{id}`): an unknown id, or
 * one of another tenant, is a 404. The id's schema is a plain string unless the resource bounds it.
 */
export function byIdRoute<
  const M extends 'get' | 'put' | 'delete',
  const P extends `${string}/{id}`,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType = z.ZodNever,
>(permission: PermissionSpec, method: M, path: P, spec: RouteSpec<B, A> & { id?: z.ZodString }) {
  const params = z.object({ id: spec.id ?? z.string() });
  return shapedRoute(permission, method, path, { params }, spec, [401, 403, 404]);
}

/**
 * A route that needs credentials and takes a JSON body (a creation, a command, a replacement): the body's
 * problems and the permission's come with it.
 */
export function bodyRoute<
  const M extends 'post' | 'put',
  const P extends string,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType,
>(permission: PermissionSpec, method: M, path: P, spec: RouteSpec<B, A> & { body: B }) {
  return shapedRoute(permission, method, path, {}, spec, [401, 403]);
}
