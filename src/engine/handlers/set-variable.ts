import { convertValue, isVariableType } from '../values.js';
import type { ActivityHandler } from './handler.js';

/** Sets a declared variable to a value converted to the variable's type. */
export const setVariable: ActivityHandler = {
  typeName: 'Elsa.SetVariable',
  async execute({ s, def, inputs, complete, fault }) {
    const variableId = String(inputs.variable);
    const variable = def.variables.find((v) => v.id === variableId);
    if (!variable) return fault(`Variable with ID ${variableId} not found`);
    const converted = isVariableType(variable.typeName) ? convertValue(variable.typeName, inputs.value) : undefined;
    if (!converted?.ok) return fault(`Value is not a valid ${variable.typeName} for variable ${variableId}`);
    s.variables[variableId] = converted.value;
    await complete('Done');
  },
};
