import { finish as finishInstance } from '../transitions.js';
import type { ActivityHandler } from './handler.js';

/** Ends the instance, discarding whatever else was scheduled or awaited. */
export const finish: ActivityHandler = {
  typeName: 'Elsa.Finish',
  async execute({ s, now, finishRecord }) {
    await finishRecord('Completed');
    finishInstance(s, now);
  },
};
