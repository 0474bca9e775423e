import { createHash } from 'node:crypto';
import type { Priority } from '@temporalio/common';
import { tenantKey } from '../auth/principal.js';

/** Temporal limits fairness keys to 64 bytes. */
const MAX_KEY_BYTES = 64;

/**
 * The Temporal fairness key of a tenant (Task Queue Fairness): every workflow and activity of a tenant's
 * plans and instances carries it, so that a backlogged task queue hands out tasks to tenants in turn instead
 * of first come, first served. `default` for the default tenant; a long tenant id keeps a readable prefix
 * and a hash, so two tenants never share a key.
 */
export function fairnessKey(tenant: string | null): string {
  const key = tenantKey(tenant);
  if (key === '') return 'default';
  if (Buffer.byteLength(key) <= MAX_KEY_BYTES && key !== 'default') return key;
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
  return `${Buffer.from(key)
    .subarray(0, 40)
    .toString('utf8')
    .replace(/\uFFFD+$/, '')}~${hash}`;
}

/** The priority a tenant's workflows start with: its fairness key; activities and child work inherit it. */
export function tenantPriority(tenant: string | null): Priority {
  return { fairnessKey: fairnessKey(tenant) };
}

/**
 * Temporal's priority key of plan workflows and, inherited, their activities (1 is first; unset is 3): on a
 * task queue that holds a backlog of instance workflow tasks (a burst of starts, a recorded trigger being
 * told), a plan's tasks are handed out first. A Cancel plan is how an operator stops a runaway, so it must
 * never queue behind the work it is to stop (contract section 8; an attack run saw a plan start 33 s after
 * its submission, behind its own tenant's 2,500 resumptions).
 */
export const PLAN_PRIORITY_KEY = 1;

/** A plan workflow's priority: first, and its tenant's fairness key. */
export function planPriority(tenant: string | null): Priority {
  return { ...tenantPriority(tenant), priorityKey: PLAN_PRIORITY_KEY };
}
