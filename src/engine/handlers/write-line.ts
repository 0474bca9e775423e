import type { ActivityHandler } from './handler.js';

/** Writes its text to the instance's journal. */
export const writeLine: ActivityHandler = {
  typeName: 'Elsa.WriteLine',
  async execute({ inputs, writeJournal, complete }) {
    await writeJournal(inputs.text === null || inputs.text === undefined ? '' : String(inputs.text));
    await complete('Done');
  },
};
