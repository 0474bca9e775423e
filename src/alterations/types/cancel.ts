import { z } from '@hono/zod-openapi';
import { defineAlterationType } from './spec.js';

/** Cancels the instance: Finished/Cancelled, its bookmarks and scheduled work removed, its records closed. */
export const cancel = defineAlterationType({
  type: 'Cancel',
  schema: z.strictObject({ type: z.literal('Cancel') }),
  synopsis: 'Cancel',
  apply(s) {
    s.status = 'Finished';
    s.subStatus = 'Cancelled';
    s.scheduled = [];
    s.bookmarks = [];
    s.finishedAt = s.updatedAt;
    return undefined;
  },
  closesRecords: () => ({ of: 'instance' }),
  summary: () => 'Cancel',
  form: { fields: [], note: 'Cancels the instance: its bookmarks and scheduled work are removed.' },
  example: { type: 'Cancel' },
});
