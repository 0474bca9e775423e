import type { FieldError } from '../errors.js';
import { pointer } from '../errors.js';
import { OUTBOUND_METHODS, outboundMethod } from '../connections/http.js';
import { findActivityType, IN_PORT } from './activity-types.js';
import {
  ACTIVITY_META_FIELDS,
  type ActivityNode,
  type Flowchart,
  InputValueSchema,
  type VariableDefinition,
  type WorkflowDefinitionRequest,
} from './definition-schema.js';
import { findResilienceStrategy, RESILIENCE_STRATEGIES } from './resilience.js';
import { convertValue, isVariableType, VARIABLE_TYPES } from './values.js';

/** The activity an instance starts with: `root.start`, else the one activity with no inbound connection. */
export function startActivityId(root: Flowchart): string | undefined {
  if (root.start) return root.start;
  const targets = new Set(root.connections.map((c) => c.target.activity));
  const starts = root.activities.filter((a) => !targets.has(a.id));
  return starts.length === 1 ? starts[0]!.id : undefined;
}

/**
 * A flowchart's activities by id and its connections by source, built once per flowchart object (a
 * definition version's root is read once and kept in the definition cache). Lookups were linear scans: an
 * instance waiting on 3,500 bookmarks, migrated by 100 alterations, cost 3,500 × 3,500 × 100 comparisons
 * on the event loop (30 s for one preview of 24 such instances); a 4,000-step chain, a scan of its
 * connections per step.
 */
interface FlowchartIndex {
  activities: Map<string, ActivityNode>;
  /** `activityId \0 port` → the activities its connections lead to, in the definition's order. */
  next: Map<string, string[]>;
}
const indexes = new WeakMap<Flowchart, FlowchartIndex>();

function indexOf(root: Flowchart): FlowchartIndex {
  let index = indexes.get(root);
  if (!index) {
    const activities = new Map<string, ActivityNode>();
    // The first of a duplicated id wins, as `Array.find` did (a published definition has none).
    for (const a of root.activities) if (!activities.has(a.id)) activities.set(a.id, a);
    const next = new Map<string, string[]>();
    for (const c of root.connections) {
      const key = `${c.source.activity}\u0000${c.source.port}`;
      const targets = next.get(key);
      if (targets) targets.push(c.target.activity);
      else next.set(key, [c.target.activity]);
    }
    index = { activities, next };
    indexes.set(root, index);
  }
  return index;
}

/** Activities to schedule after `activityId` completed with `outcome`, following the flowchart. */
export function successors(root: Flowchart, activityId: string, outcome: string): string[] {
  return [...(indexOf(root).next.get(`${activityId}\u0000${outcome}`) ?? [])];
}

export function findActivity(root: Flowchart, activityId: string): ActivityNode | undefined {
  return indexOf(root).activities.get(activityId);
}

export function nodeIdOf(root: Flowchart, activity: ActivityNode): string {
  return activity.nodeId ?? `${root.id}:${activity.id}`;
}

/** The input fields of an activity node: every field that is not one of the common meta fields. */
export function inputFields(activity: ActivityNode): [string, unknown][] {
  return Object.entries(activity).filter(([k]) => !(ACTIVITY_META_FIELDS as readonly string[]).includes(k));
}

/**
 * Checks what a schema cannot: known activity types and inputs, unique ids, connections that name real
 * activities and ports, variables that exist and hold values of their type, and a unique start.
 * Returns every problem found, each with the JSON pointer of the offending field.
 */
export function validateDefinition(def: WorkflowDefinitionRequest): FieldError[] {
  const errors: FieldError[] = [];
  const add = (segments: (string | number)[], message: string) => errors.push({ path: pointer(segments), message });

  const variables = new Map<string, VariableDefinition>();
  def.variables.forEach((v, i) => {
    if (variables.has(v.id)) add(['variables', i, 'id'], `Duplicate variable id "${v.id}"`);
    variables.set(v.id, v);
    if (!isVariableType(v.typeName)) {
      add(
        ['variables', i, 'typeName'],
        `Unknown variable type "${v.typeName}"; expected one of ${VARIABLE_TYPES.join(', ')}`,
      );
    } else if (v.value !== undefined && !convertValue(v.typeName, v.value).ok) {
      add(['variables', i, 'value'], `Value is not a valid ${v.typeName} for variable ${v.id}`);
    }
  });

  const root = def.root;
  const ids = new Map<string, ActivityNode>();
  root.activities.forEach((activity, i) => {
    const at = (...rest: (string | number)[]) => ['root', 'activities', i, ...rest];
    if (ids.has(activity.id)) add(at('id'), `Duplicate activity id "${activity.id}"`);
    ids.set(activity.id, activity);
    const type = findActivityType(activity.type);
    if (!type) {
      add(at('type'), `Unknown activity type "${activity.type}"`);
      return;
    }
    if (activity.resilienceStrategyId !== undefined && !findResilienceStrategy(activity.resilienceStrategyId)) {
      add(
        at('resilienceStrategyId'),
        `Unknown resilience strategy "${activity.resilienceStrategyId}"; known: ${RESILIENCE_STRATEGIES.map((r) => r.id).join(', ')}`,
      );
    }
    const fields = new Map(inputFields(activity));
    for (const [name, value] of fields) {
      const descriptor = type.inputs.find((d) => d.name === name);
      if (!descriptor) {
        add(at(name), `Unknown input "${name}" for activity type ${type.typeName}`);
        continue;
      }
      const parsed = InputValueSchema.safeParse(value);
      if (!parsed.success) {
        add(at(name), `Input "${name}" must be {typeName, expression: {type: "Literal" | "Variable", value}}`);
        continue;
      }
      const expr = parsed.data.expression;
      if (expr.type === 'Variable' && (typeof expr.value !== 'string' || !variables.has(expr.value))) {
        add(
          at(name, 'expression', 'value'),
          `Input "${name}" refers to unknown variable ${JSON.stringify(expr.value)}`,
        );
      }
      if (descriptor.connectionType && expr.type === 'Literal') {
        const v = expr.value as Record<string, unknown> | null;
        const shaped =
          v !== null &&
          typeof v === 'object' &&
          !Array.isArray(v) &&
          Object.keys(v).every((k) => k === 'connectionName') &&
          (v.connectionName === undefined || v.connectionName === null || typeof v.connectionName === 'string');
        if (!shaped)
          add(
            at(name, 'expression', 'value'),
            `Input "${name}" must be {"connectionName": "<name of a saved ${descriptor.connectionType}>"}`,
          );
      }
      if (type.typeName === 'Elsa.Http.SendHttpRequest' && name === 'resultVariable' && expr.type === 'Literal') {
        if (typeof expr.value !== 'string' || !variables.has(expr.value)) {
          add(
            at(name, 'expression', 'value'),
            `Variable with ID ${JSON.stringify(expr.value)} is not defined in this workflow`,
          );
        }
      }
      if (
        type.typeName === 'Elsa.Http.SendHttpRequest' &&
        name === 'method' &&
        expr.type === 'Literal' &&
        !outboundMethod(expr.value)
      ) {
        add(
          at(name, 'expression', 'value'),
          `Method ${JSON.stringify(expr.value)} is not one of ${OUTBOUND_METHODS.join(', ')}`,
        );
      }
      if (type.typeName === 'Elsa.SetVariable' && name === 'variable' && expr.type === 'Literal') {
        if (typeof expr.value !== 'string' || !variables.has(expr.value)) {
          add(
            at(name, 'expression', 'value'),
            `Variable with ID ${JSON.stringify(expr.value)} is not defined in this workflow`,
          );
        }
      }
    }
    for (const d of type.inputs) {
      if (d.isRequired && !fields.has(d.name))
        add(at(d.name), `Missing required input "${d.name}" for activity type ${type.typeName}`);
    }
  });

  root.connections.forEach((c, i) => {
    const at = (...rest: (string | number)[]) => ['root', 'connections', i, ...rest];
    const source = ids.get(c.source.activity);
    if (!source) add(at('source', 'activity'), `Connection source names unknown activity "${c.source.activity}"`);
    else {
      const type = findActivityType(source.type);
      if (type && !type.outcomes.includes(c.source.port)) {
        const ports = type.outcomes.length ? type.outcomes.join(', ') : 'none';
        add(
          at('source', 'port'),
          `Activity "${source.id}" (${type.typeName}) has no outcome port "${c.source.port}"; its ports: ${ports}`,
        );
      }
    }
    if (!ids.has(c.target.activity))
      add(at('target', 'activity'), `Connection target names unknown activity "${c.target.activity}"`);
    if (c.target.port !== IN_PORT)
      add(at('target', 'port'), `Unknown target port "${c.target.port}"; activities are entered through "${IN_PORT}"`);
  });

  if (root.start !== undefined) {
    if (!ids.has(root.start)) add(['root', 'start'], `Start activity "${root.start}" is not one of the activities`);
  } else {
    const targets = new Set(root.connections.map((c) => c.target.activity));
    const starts = root.activities.filter((a) => !targets.has(a.id)).map((a) => a.id);
    if (starts.length !== 1) {
      const why =
        starts.length === 0
          ? 'every activity has an inbound connection'
          : `${starts.length} activities have no inbound connection (${starts.join(', ')})`;
      add(['root', 'start'], `No unique start activity: ${why}; set root.start`);
    }
  }
  return errors;
}
