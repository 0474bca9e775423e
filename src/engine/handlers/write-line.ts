import type { ActivityHandler } from './handler.js';

/** Writes its text to the instance's journal. */
export const writeLine: ActivityHandler = {
  typeName: 'Elsa.WriteLine',
  async execute({ client, s, activity, inputs, now, complete }) {
    const text = inputs.text === null || inputs.text === undefined ? '' : String(inputs.text);
    await client.query(
      'INSERT INTO journal_entries (instance_id, activity_id, message, timestamp) VALUES ($1, $2, $3, $4)',
      [s.id, activity.id, text, now],
    );
    await complete('Done');
  },
};
