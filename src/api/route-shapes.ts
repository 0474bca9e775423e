import { type RouteConfig, z } from '@hono/zod-openapi';
import type { PermissionSpec } from '../auth/permissions.js';
import { jsonBody, problems } from './schemas.js';
import { secureRoute } from './secure-route.js';

/** The plan a route under `/alterations/{planId}` is about. */
export const PlanParams = { params: z.object({ planId: z.string() }) };

/** What most commands on a plan answer: the plan, and the status it has now. */
export const PlanStatusAnswer = z.object({ planId: z.string(), status: z.number().int() });

/** What sets one route on a resource apart from another: everything else follows from the resource. */
interface ResourceSpec<B extends z.ZodType, A extends RouteConfig['responses']> {
  tags: string[];
  summary: string;
  /** The JSON body, when the route takes one: its problems (400, 413, 415) come with it. */
  body?: B;
  /** The answers other than problems. */
  answer: A;
}

/** A body's part of a route's request, typed as the handler reads it (`c.req.valid('json')`). */
type BodyPart<B extends z.ZodType> = [B] extends [z.ZodNever] ? object : ReturnType<typeof jsonBody<B>>;

/**
 * A route on one resource named in its path: an unknown one, or one of another tenant, is a 404; a route that
 * changes it may find it in a state that forbids the change (409).
 */
function resourceRoute<
  const M extends RouteConfig['method'],
  const P extends string,
  const Params extends z.ZodObject,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType,
>(permission: PermissionSpec, method: M, path: P, params: Params, spec: ResourceSpec<B, A>, conflict: boolean) {
  return secureRoute(permission, {
    method,
    path,
    tags: spec.tags,
    summary: spec.summary,
    request: { params, ...((spec.body ? jsonBody(spec.body) : {}) as BodyPart<B>) },
    responses: {
      ...spec.answer,
      ...problems(401, 403, 404),
      ...(conflict ? problems(409) : {}),
      ...(spec.body ? problems(400, 413, 415) : {}),
    },
  });
}

/**
 * A command on one plan, `/alterations/{planId}/<verb>`. Every such command (cancel, pause, resume, rollout,
 * revert, approve, reject) may find its plan unknown or in a state it does not apply to: only its permission,
 * body and answer differ.
 */
export function planCommandRoute<
  const V extends string,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType = z.ZodNever,
  const M extends 'post' | 'patch' = 'post',
>(permission: PermissionSpec, verb: V, spec: ResourceSpec<B, A> & { method?: M }) {
  const method = spec.method ?? ('post' as M);
  return resourceRoute(permission, method, `/alterations/{planId}/${verb}` as const, PlanParams.params, spec, true);
}

/**
 * A read, replacement or removal of one resource by its id (`/workflow-instances/{id}`): the id's schema is a
 * plain string unless the resource bounds it.
 */
export function byIdRoute<
  const M extends 'get' | 'put' | 'delete',
  const P extends `${string}/{id}`,
  const A extends RouteConfig['responses'],
  const B extends z.ZodType = z.ZodNever,
>(permission: PermissionSpec, method: M, path: P, spec: ResourceSpec<B, A> & { id?: z.ZodString; conflict?: boolean }) {
  const params = z.object({ id: spec.id ?? z.string() });
  return resourceRoute(permission, method, path, params, spec, spec.conflict === true);
}
