import type { ActivityHandler } from './handler.js';

/** Faults the instance with its message. */
export const fault: ActivityHandler = {
  typeName: 'Elsa.Fault',
  async execute({ inputs, fault: faultWith }) {
    await faultWith(inputs.message === null || inputs.message === undefined ? 'Faulted' : String(inputs.message));
  },
};
