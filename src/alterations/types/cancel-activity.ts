import { z } from '@hono/zod-openapi';
import { findActivity } from '../../engine/flowchart.js';
import { currentDefinition, defineAlterationType, Identifier } from './spec.js';

/**
 * Removes an activity's scheduled work and bookmarks and closes its running record; the instance goes on as
 * if the activity had ended without an outcome (apply.ts settles it once the job's alterations succeeded).
 */
export const cancelActivity = defineAlterationType({
  type: 'CancelActivity',
  schema: z.strictObject({ type: z.literal('CancelActivity'), activityId: Identifier }).openapi({
    description:
      "Removes the activity's scheduled work and bookmarks and marks its running record Canceled; the instance then continues as if the activity had ended without an outcome (it finishes when nothing else is scheduled or waiting)",
  }),
  synopsis: 'CancelActivity {activityId}',
  apply(s, a, defs) {
    const def = currentDefinition(s, defs);
    if (!findActivity(def.root, a.activityId)) return `Activity with ID ${a.activityId} not found`;
    const scheduled = s.scheduled.includes(a.activityId);
    const waiting = s.bookmarks.some((b) => b.activityId === a.activityId);
    if (!scheduled && !waiting) return `Activity ${a.activityId} is not scheduled or waiting`;
    s.scheduled = s.scheduled.filter((id) => id !== a.activityId);
    s.bookmarks = s.bookmarks.filter((b) => b.activityId !== a.activityId);
    // Nothing follows the activity; the instance settles once the job's alterations have all succeeded
    // (`applyResolved`), so a later alteration of the same job still finds it running.
    return undefined;
  },
  closesRecords: (a) => ({ of: 'activity', activityId: a.activityId }),
  summary: (a) => `CancelActivity ${a.activityId}`,
  form: { fields: [{ key: 'activityId', label: 'Activity id', kind: 'text' }] },
  example: { type: 'CancelActivity', activityId: 'wait' },
});
