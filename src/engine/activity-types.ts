import { type ActivityType, HTTP_CONNECTION_TYPE, type InputDescriptor } from '../vocabulary/descriptors.js';

export type { ActivityType, InputDescriptor };

/**
 * The registry of built-in activity types: what inputs each takes and which outcomes (ports) it has.
 * Validation, the activity descriptor catalog and the executor all read this one table.
 */

function input(
  name: string,
  order: number,
  props: Partial<InputDescriptor> & Pick<InputDescriptor, 'typeName' | 'description'>,
): InputDescriptor {
  return {
    name,
    displayName: name.charAt(0).toUpperCase() + name.slice(1),
    uiHint: 'singleline',
    isRequired: true,
    isSensitive: false,
    defaultValue: null,
    order,
    ...props,
  };
}

export const BUILTIN_ACTIVITIES: readonly ActivityType[] = [
  {
    typeName: 'Elsa.WriteLine',
    namespace: 'Elsa',
    displayName: 'Write Line',
    description: 'Appends a line of text to the instance journal.',
    inputs: [input('text', 0, { typeName: 'String', description: 'The text to write.' })],
    outcomes: ['Done'],
  },
  {
    typeName: 'Elsa.SetVariable',
    namespace: 'Elsa',
    displayName: 'Set Variable',
    description: 'Sets a workflow variable, converted to its type.',
    inputs: [
      input('variable', 0, {
        typeName: 'String',
        description: 'The id of the variable to set.',
        uiHint: 'variable-picker',
      }),
      input('value', 1, { typeName: 'Object', description: 'The value to assign.', uiHint: 'multiline' }),
    ],
    outcomes: ['Done'],
  },
  {
    typeName: 'Elsa.Event',
    namespace: 'Elsa',
    displayName: 'Event',
    description: 'Suspends the instance until the named event is triggered.',
    inputs: [input('eventName', 0, { typeName: 'String', description: 'The name of the event to wait for.' })],
    outcomes: ['Done'],
  },
  {
    typeName: 'Elsa.Fault',
    namespace: 'Elsa',
    displayName: 'Fault',
    description: 'Faults the instance: an incident is recorded and the instance stops until retried.',
    inputs: [input('message', 0, { typeName: 'String', description: 'The fault message.' })],
    outcomes: [],
  },
  {
    typeName: 'Elsa.Http.SendHttpRequest',
    namespace: 'Elsa.Http',
    displayName: 'Send HTTP Request',
    description: "Sends an HTTP request to a saved HTTP connection's base URL, with its headers and bearer token.",
    inputs: [
      input('connection', 0, {
        typeName: `ConnectionProperties<${HTTP_CONNECTION_TYPE}>`,
        description: 'The saved HTTP connection to call ({"connectionName": "..."}).',
        uiHint: 'dropdown',
        connectionType: HTTP_CONNECTION_TYPE,
        noLog: true,
      }),
      input('method', 1, {
        typeName: 'String',
        description: 'The HTTP method.',
        isRequired: false,
        defaultValue: 'GET',
      }),
      input('path', 2, {
        typeName: 'String',
        description: 'The path, relative to the base URL.',
        isRequired: false,
        defaultValue: '',
      }),
      input('body', 3, {
        typeName: 'Object',
        description: 'A JSON body to send.',
        isRequired: false,
        uiHint: 'json-editor',
      }),
      input('resultVariable', 4, {
        typeName: 'String',
        description: 'The id of the variable that receives the response status code.',
        isRequired: false,
        uiHint: 'variable-picker',
      }),
    ],
    outcomes: ['Done'],
  },
  {
    typeName: 'Elsa.Finish',
    namespace: 'Elsa',
    displayName: 'Finish',
    description: 'Finishes the instance, discarding any other scheduled work and bookmarks.',
    inputs: [],
    outcomes: [],
  },
];

const byType = new Map(BUILTIN_ACTIVITIES.map((a) => [a.typeName, a]));

export function findActivityType(typeName: string): ActivityType | undefined {
  return byType.get(typeName);
}

/** The port every activity is entered through. */
export const IN_PORT = 'In';
