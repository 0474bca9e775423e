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
    // Scheduling an activity that has an incident again is its retry: its incidents are resolved (running it may
    // record a new one), and an instance left with none has work again, as a suspended one has.
    s.incidents = s.incidents.filter((i) => i.activityId !== a.activityId);
    if (s.subStatus === 'Suspended' || (s.subStatus === 'Faulted' && s.incidents.length === 0)) s.subStatus = 'Pending';
    return undefined;
  },
  summary: (a) => `ScheduleActivity ${a.activityId}`,
  form: { fields: [{ key: 'activityId', label: 'Activity id', kind: 'text' }] },
  example: { type: 'ScheduleActivity', activityId: 'set' },
});
