import type { ActivityType } from './activity-types.js';
import type { ActivityNode, InputValue } from './definition-schema.js';
import type { DefinitionVersion } from './definitions.js';

/** Evaluates one input expression against the instance's variables. */
export function evaluateInput(
  input: InputValue | undefined,
  def: DefinitionVersion,
  variables: Record<string, unknown>,
): unknown {
  if (!input) return null;
  const { expression } = input;
  if (expression.type === 'Literal') return expression.value ?? null;
  const id = String(expression.value);
  if (id in variables) return variables[id];
  return def.variables.find((v) => v.id === id)?.value ?? null;
}

/** Evaluates every input of an activity, in descriptor order. */
export function evaluateInputs(
  type: ActivityType,
  activity: ActivityNode,
  def: DefinitionVersion,
  variables: Record<string, unknown>,
): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const d of type.inputs) {
    const given = activity[d.name] as InputValue | undefined;
    values[d.name] = given === undefined ? d.defaultValue : evaluateInput(given, def, variables);
  }
  return values;
}

/** What an activity record shows of the inputs: no-log inputs masked as "****". */
export function recordedInputs(type: ActivityType, values: Record<string, unknown>): Record<string, unknown> {
  const shown: Record<string, unknown> = {};
  for (const d of type.inputs) shown[d.name] = d.noLog ? '****' : values[d.name];
  return shown;
}
