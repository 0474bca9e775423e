import { z } from '@hono/zod-openapi';
import { convertValue, isVariableType } from '../../engine/values.js';
import { currentDefinition, defineAlterationType, Identifier } from './spec.js';

/** Sets a variable of the instance, converted to the variable's type (null clears it). */
export const modifyVariable = defineAlterationType({
  type: 'ModifyVariable',
  schema: z
    .strictObject({
      type: z.literal('ModifyVariable'),
      variableId: Identifier,
      value: z.unknown().openapi({ description: 'Any JSON value, converted to the variable type; null clears it' }),
    })
    .refine((a) => a.value !== undefined, {
      message: 'Required: the value to set (null clears the variable)',
      path: ['value'],
    }),
  synopsis: 'ModifyVariable {variableId, value}',
  setsVariablesOnly: true,
  apply(s, a, defs) {
    const def = currentDefinition(s, defs);
    const variable = def.variables.find((v) => v.id === a.variableId);
    if (!variable || !isVariableType(variable.typeName)) return `Variable with ID ${a.variableId} not found`;
    const converted = convertValue(variable.typeName, a.value);
    if (!converted.ok) return `Value is not a valid ${variable.typeName} for variable ${a.variableId}`;
    s.variables[a.variableId] = converted.value;
    return undefined;
  },
  summary: (a) => `ModifyVariable ${a.variableId}`,
  form: {
    fields: [
      { key: 'variableId', label: 'Variable id', kind: 'text' },
      {
        key: 'value',
        label: 'New value',
        kind: 'json',
        hint: 'JSON (42, true, "text", null); other text is taken as a string.',
      },
    ],
  },
  example: { type: 'ModifyVariable', variableId: 'approved', value: true },
});
