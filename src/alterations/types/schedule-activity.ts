import { z } from '@hono/zod-openapi';
import { findActivity } from '../../engine/flowchart.js';
import { currentDefinition, defineAlterationType, Identifier } from './spec.js';

/** Schedules an activity of the instance's version; its pure steps run with the change (apply.ts saveInstances). */
export const scheduleActivity = defineAlterationType({
  type: 'ScheduleActivity',
  schema: z.strictObject({ type: z.literal('ScheduleActivity'), activityId: Identifier }),
  synopsis: 'ScheduleActivity {activityId}',
  apply(s, a, defs) {
    const def = currentDefinition(s, defs);
    if (!findActivity(def.root, a.activityId)) return `Activity with ID ${a.activityId} not found`;
    if (!s.scheduled.includes(a.activityId)) s.scheduled.push(a.activityId);
    // A suspended instance has work again; a faulted one stays faulted until it is retried.
    if (s.subStatus === 'Suspended') s.subStatus = 'Pending';
    return undefined;
  },
  summary: (a) => `ScheduleActivity ${a.activityId}`,
  form: { fields: [{ key: 'activityId', label: 'Activity id', kind: 'text' }] },
  example: { type: 'ScheduleActivity', activityId: 'set' },
});
