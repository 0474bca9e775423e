import type { ActivityHandler } from './handler.js';

/** Suspends the instance on a bookmark until the event is triggered; the record stays Running until then. */
export const event: ActivityHandler = {
  typeName: 'Elsa.Event',
  async execute({ s, activity, inputs }) {
    s.bookmarks.push({ activityId: activity.id, eventName: String(inputs.eventName) });
  },
};
