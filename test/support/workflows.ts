/** Small builders for version 3 workflow JSON in tests. */

export const lit = (value: unknown, typeName = 'String') => ({ typeName, expression: { type: 'Literal', value } });
export const varRef = (variableId: string, typeName = 'Object') => ({
  typeName,
  expression: { type: 'Variable', value: variableId },
});

export const writeLine = (id: string, text: string) => ({ id, type: 'Elsa.WriteLine', version: 1, text: lit(text) });
export const event = (id: string, eventName: string) => ({
  id,
  type: 'Elsa.Event',
  version: 1,
  eventName: lit(eventName),
});
export const fault = (id: string, message: string) => ({ id, type: 'Elsa.Fault', version: 1, message: lit(message) });
export const finish = (id: string) => ({ id, type: 'Elsa.Finish', version: 1 });
export const setVariable = (id: string, variable: string, value: unknown, typeName = 'Object') => ({
  id,
  type: 'Elsa.SetVariable',
  version: 1,
  variable: lit(variable),
  value: lit(value, typeName),
});

export const connect = (source: string, target: string, port = 'Done') => ({
  source: { activity: source, port },
  target: { activity: target, port: 'In' },
});

/** A definition whose flowchart starts at `start` and has these activities and connections. */
export const flowchart = (
  definitionId: string,
  activities: ({ id: string } & Record<string, unknown>)[],
  connections: ReturnType<typeof connect>[],
  start = 'start',
) => ({ definitionId, root: { type: 'Elsa.Flowchart', id: 'flow1', start, activities, connections } });

/** A flowchart whose activities run one after another in the given order. */
export function chain(
  definitionId: string,
  activities: ({ id: string } & Record<string, unknown>)[],
  extra: Record<string, unknown> = {},
) {
  const connections = activities.slice(1).map((a, i) => connect(activities[i]!.id, a.id));
  return { definitionId, root: { type: 'Elsa.Flowchart', id: 'flow1', activities, connections }, ...extra };
}

/** The contract's example: write "started", then wait for the "approve" event. */
export const orderApproval = (definitionId = 'order-approval') =>
  chain(definitionId, [writeLine('start', 'started'), event('wait', 'approve')], {
    name: 'Order approval',
    variables: [{ id: 'approved', name: 'Approved', typeName: 'Boolean', value: false }],
  });

/**
 * Writes "started", waits on "approve", then writes `doneText`; a detached WriteLine "note" runs only when
 * scheduled by an alteration. Variables: Int32 `amount` (default `amountDefault`) and String `note`.
 */
export const approvalWithNote = (definitionId: string, doneText = 'done', amountDefault = 0) => ({
  definitionId,
  variables: [
    { id: 'amount', name: 'Amount', typeName: 'Int32', value: amountDefault },
    { id: 'note', name: 'Note', typeName: 'String' },
  ],
  root: {
    type: 'Elsa.Flowchart',
    id: 'flow1',
    start: 'start',
    activities: [
      writeLine('start', 'started'),
      event('wait', 'approve'),
      writeLine('done', doneText),
      writeLine('note', 'note written'),
    ],
    connections: [connect('start', 'wait'), connect('wait', 'done')],
  },
});
