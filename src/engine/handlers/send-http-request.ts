import { OUTBOUND_METHODS, outboundMethod } from '../../connections/http.js';
import type { ActivityHandler } from './handler.js';

/**
 * Calls through the selected HTTP connection. The call itself is made by the executor after this step's
 * first part committed (no lock is held while waiting for the remote end); see src/engine/executor.ts.
 */
export const sendHttpRequest: ActivityHandler = {
  typeName: 'Elsa.Http.SendHttpRequest',
  async execute({ inputs, connection, fault }) {
    if (!connection?.configuration) {
      return fault(
        connection?.name
          ? `Connection "${connection.name}" could not be resolved: no ${connection.connectionType} of that name exists in this tenant`
          : 'No connection is selected for Send HTTP Request',
      );
    }
    // An absent method or path is the input's default (GET, ''); one evaluated to nothing is an error.
    if (typeof inputs.method !== 'string' || inputs.method === '' || typeof inputs.path !== 'string') {
      return fault('Send HTTP Request needs a method and a path (text)');
    }
    // A method computed at run time (a variable) is checked here; a literal one was checked at publish.
    if (!outboundMethod(inputs.method))
      return fault(`Method ${JSON.stringify(inputs.method)} is not one of ${OUTBOUND_METHODS.join(', ')}`);
    return callRequest(connection.name ?? '', connection.configuration, inputs);
  },
};

export function callRequest(
  connectionName: string,
  configuration: Record<string, unknown>,
  inputs: Record<string, unknown>,
) {
  return {
    kind: 'call' as const,
    connectionName,
    configuration,
    method: String(inputs.method),
    path: String(inputs.path),
    body: inputs.body,
    resultVariable:
      typeof inputs.resultVariable === 'string' && inputs.resultVariable ? inputs.resultVariable : undefined,
  };
}
