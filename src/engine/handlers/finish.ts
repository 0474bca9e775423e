import { finish as finishInstance } from '../transitions.js';
import type { ActivityHandler } from './handler.js';

/**
 * Ends the instance, discarding whatever else was scheduled or awaited: the records of other branches still
 * running (a wait, a call still out) are Canceled, as a Cancel leaves them.
 */
export const finish: ActivityHandler = {
  typeName: 'Elsa.Finish',
  async execute({ s, now, finishRecord, cancelOthers }) {
    await finishRecord('Completed');
    await cancelOthers();
    finishInstance(s, now);
  },
};
