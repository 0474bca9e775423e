import { createHash } from 'node:crypto';
import type { AlterationType } from '../alterations/model.js';
import { ALTERATION_TYPES, type FormField } from '../alterations/types/index.js';
import { MAX_WINDOWS, WEEKDAYS } from '../alterations/schedule.js';
import { type FieldError, isUnknownProperty } from '../errors.js';

/**
 * New plan's form as plain strings, and its conversions: from the posted fields, from a submit body (Plan
 * JSON, or Instances' "Alter these"), and to a submit body. The body is then validated by the API's own
 * schemas (src/alterations/requests.ts), whose errors name JSON pointers; `fieldIdOf` maps a pointer to
 * the form field it concerns, so each error is shown next to its field.
 */

/** The alteration types New plan offers: every registered type, in the registry's order (src/alterations/types). */
export const FORM_ALTERATION_TYPES = Object.keys(ALTERATION_TYPES) as AlterationType[];
const isAlterationType = (t: string): t is AlterationType => (FORM_ALTERATION_TYPES as string[]).includes(t);
/** The fields of a type's row, as its spec declares them. */
export const formFieldsOf = (type: AlterationType): readonly FormField[] => ALTERATION_TYPES[type].form.fields;

export const LIST_FIELDS = [
  { key: 'definitionIds', label: 'Definition ids' },
  { key: 'workflowInstanceIds', label: 'Instance ids' },
  { key: 'correlationIds', label: 'Correlation ids' },
  { key: 'names', label: 'Instance names' },
  { key: 'definitionVersionIds', label: 'Definition version ids' },
] as const;
export type ListField = (typeof LIST_FIELDS)[number]['key'];

export const ACTIVITY_STATUSES = ['Running', 'Completed', 'Canceled', 'Faulted'] as const;
export const TIMESTAMP_COLUMNS = ['CreatedAt', 'UpdatedAt', 'FinishedAt'] as const;
export const TIMESTAMP_OPERATORS = [
  'Is',
  'IsNot',
  'LessThan',
  'GreaterThan',
  'LessThanOrEqual',
  'GreaterThanOrEqual',
] as const;
export const MAX_ACTIVITY_FILTERS = 20;
export const MAX_TIMESTAMP_FILTERS = 10;
export const MAX_INCIDENT_FILTERS = 20;
export const INCIDENT_FILTER_KEYS = ['activityId', 'activityType', 'messageContains'] as const;
export const MAX_ALTERATIONS = 100;

/** An alteration as its row holds it: each field of its type (by the property it fills) as text. */
export interface AlterationRow {
  type: AlterationType;
  values: Record<string, string>;
  /** A row with a mappings field: the version to draft them from (the form's only: not in the body). */
  draftFrom: string;
}

/** A maintenance window as the form holds it. */
export interface WindowRow {
  days: string[];
  from: string;
  to: string;
  timeZone: string;
}

export { MAX_WINDOWS, WEEKDAYS };
/** A new window row's time zone: people change it where they are not on UTC. */
export const DEFAULT_TIME_ZONE = 'UTC';

export interface PlanForm {
  id: string;
  lists: Record<ListField, string>;
  searchTerm: string;
  statuses: string[];
  subStatuses: string[];
  hasIncidents: '' | 'true' | 'false';
  isSystem: '' | 'true' | 'false';
  emptyFilterSelectsAll: boolean;
  activityFilters: { activityId: string; nodeId: string; name: string; status: string }[];
  timestampFilters: { column: string; operator: string; timestamp: string }[];
  incidentFilters: Record<(typeof INCIDENT_FILTER_KEYS)[number], string>[];
  alterations: AlterationRow[];
  rate: string;
  canary: string;
  stopOnFailureRatio: string;
  notBefore: string;
  windows: WindowRow[];
  approvalRequired: boolean;
  /** `verify`: the filter its instances must come to match (JSON), and within how many seconds. */
  verifyExpect: string;
  verifyWithin: string;
  previewLimit: string;
}

export const emptyForm = (): PlanForm => ({
  id: '',
  lists: { definitionIds: '', workflowInstanceIds: '', correlationIds: '', names: '', definitionVersionIds: '' },
  searchTerm: '',
  statuses: [],
  subStatuses: [],
  hasIncidents: '',
  isSystem: '',
  emptyFilterSelectsAll: false,
  activityFilters: [],
  timestampFilters: [],
  incidentFilters: [],
  alterations: [],
  rate: '',
  canary: '',
  stopOnFailureRatio: '',
  notBefore: '',
  windows: [],
  approvalRequired: false,
  verifyExpect: '',
  verifyWithin: '',
  previewLimit: '10',
});

export const emptyAlteration = (type: AlterationType): AlterationRow => ({
  type,
  values: Object.fromEntries(formFieldsOf(type).map((f) => [f.key, ''])),
  draftFrom: '',
});

const tri = (v: string): '' | 'true' | 'false' => (v === 'true' || v === 'false' ? v : '');

/** The form as posted (field names as `fieldIdOf` gives them). */
export function formFromFields(f: URLSearchParams): PlanForm {
  const get = (name: string) => f.get(name) ?? '';
  const form = emptyForm();
  form.id = get('plan-id').trim();
  for (const { key } of LIST_FIELDS) form.lists[key] = get(`f-${key}`);
  form.searchTerm = get('f-searchTerm');
  form.statuses = f.getAll('f-statuses');
  form.subStatuses = f.getAll('f-subStatuses');
  form.hasIncidents = tri(get('f-hasIncidents'));
  form.isSystem = tri(get('f-isSystem'));
  form.emptyFilterSelectsAll = get('f-emptyFilterSelectsAll') === 'true';
  for (let i = 0; i < MAX_ACTIVITY_FILTERS; i++) {
    const row = {
      activityId: get(`af-${i}-activityId`),
      nodeId: get(`af-${i}-nodeId`),
      name: get(`af-${i}-name`),
      status: get(`af-${i}-status`),
    };
    if (Object.values(row).some((v) => v.trim() !== '')) form.activityFilters.push(row);
  }
  for (let i = 0; i < MAX_TIMESTAMP_FILTERS; i++) {
    const row = {
      column: get(`tf-${i}-column`),
      operator: get(`tf-${i}-operator`),
      timestamp: get(`tf-${i}-timestamp`),
    };
    if (row.timestamp.trim() !== '') form.timestampFilters.push(row);
  }
  for (let i = 0; i < MAX_INCIDENT_FILTERS; i++) {
    const row = Object.fromEntries(
      INCIDENT_FILTER_KEYS.map((k) => [k, get(`if-${i}-${k}`)]),
    ) as PlanForm['incidentFilters'][number];
    if (Object.values(row).some((v) => v.trim() !== '')) form.incidentFilters.push(row);
  }
  for (let i = 0; i < MAX_ALTERATIONS; i++) {
    const type = get(`a-${i}-type`);
    if (!isAlterationType(type)) continue;
    form.alterations.push({
      type,
      values: Object.fromEntries(formFieldsOf(type).map((f) => [f.key, get(`a-${i}-${f.key}`)])),
      draftFrom: get(`a-${i}-draftFrom`),
    });
  }
  form.rate = get('r-rate').trim();
  form.canary = get('r-canary').trim();
  form.stopOnFailureRatio = get('r-stopOnFailureRatio').trim();
  form.notBefore = get('s-notBefore').trim();
  for (let i = 0; i < MAX_WINDOWS; i++) {
    const row = {
      days: f.getAll(`w-${i}-days`),
      from: get(`w-${i}-from`).trim(),
      to: get(`w-${i}-to`).trim(),
      timeZone: get(`w-${i}-timeZone`).trim(),
    };
    // A row counts once it has a day or a time (a new row comes with its time zone filled in).
    if (row.days.length || row.from || row.to) form.windows.push(row);
  }
  form.approvalRequired = get('approval-required') === 'true';
  form.verifyExpect = get('v-expect').trim();
  form.verifyWithin = get('v-within').trim();
  form.previewLimit = get('preview-limit').trim() || '10';
  return form;
}

const text = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));
const lines = (v: unknown) => (Array.isArray(v) ? v.map(text).join('\n') : '');
const strings = (v: unknown) => (Array.isArray(v) ? v.map(text) : []);
const triOf = (v: unknown): '' | 'true' | 'false' => (v === true ? 'true' : v === false ? 'false' : '');
/** The first `max` entries of a body's list (Plan JSON may hold anything there: none unless it is a list). */
const listOf = (v: unknown, max: number) =>
  Array.isArray(v) ? (v.slice(0, max) as (Record<string, unknown> | undefined)[]) : [];
/** The properties `keys` of a list's entry as text (absent, or an entry that is no object: empty). */
const textsOf = <K extends string>(entry: Record<string, unknown> | undefined, keys: readonly K[]) =>
  Object.fromEntries(keys.map((k) => [k, text(entry?.[k])])) as Record<K, string>;

/**
 * A submit body (as far as it is one: Plan JSON may be anything) as the form shows it. The body itself,
 * not this, is what a Dry run, Preview or Submit uses when it came as Plan JSON.
 */
export function formFromBody(body: unknown): PlanForm {
  const form = emptyForm();
  if (!body || typeof body !== 'object' || Array.isArray(body)) return form;
  const b = body as Record<string, unknown>;
  form.id = text(b.id);
  const filter = (b.filter && typeof b.filter === 'object' ? b.filter : {}) as Record<string, unknown>;
  for (const { key } of LIST_FIELDS) form.lists[key] = lines(filter[key]);
  form.searchTerm = text(filter.searchTerm);
  form.statuses = strings(filter.statuses);
  form.subStatuses = strings(filter.subStatuses);
  form.hasIncidents = triOf(filter.hasIncidents);
  form.isSystem = triOf(filter.isSystem);
  form.emptyFilterSelectsAll = filter.emptyFilterSelectsAll === true;
  form.activityFilters = listOf(filter.activityFilters, MAX_ACTIVITY_FILTERS).map((a) =>
    textsOf(a, ['activityId', 'nodeId', 'name', 'status']),
  );
  form.timestampFilters = listOf(filter.timestampFilters, MAX_TIMESTAMP_FILTERS).map((t) =>
    textsOf(t, ['column', 'operator', 'timestamp']),
  );
  form.incidentFilters = listOf(filter.incidentFilters, MAX_INCIDENT_FILTERS).map((x) =>
    textsOf(x, INCIDENT_FILTER_KEYS),
  );
  for (const a of listOf(b.alterations, MAX_ALTERATIONS)) {
    const type = text(a?.type);
    if (!isAlterationType(type)) continue;
    form.alterations.push({
      type,
      values: Object.fromEntries(formFieldsOf(type).map((f) => [f.key, fieldText(f, a?.[f.key])])),
      draftFrom: '',
    });
  }
  const rollout = (b.rollout && typeof b.rollout === 'object' ? b.rollout : {}) as Record<string, unknown>;
  form.rate = text(rollout.rate);
  form.canary = text(rollout.canary);
  form.stopOnFailureRatio = text(rollout.stopOnFailureRatio);
  const schedule = (b.schedule && typeof b.schedule === 'object' ? b.schedule : {}) as Record<string, unknown>;
  form.notBefore = text(schedule.notBefore);
  form.windows = listOf(schedule.windows, MAX_WINDOWS).map((w) => ({
    days: strings(w?.days),
    ...textsOf(w, ['from', 'to', 'timeZone']),
  }));
  const approval = (b.approval && typeof b.approval === 'object' ? b.approval : {}) as Record<string, unknown>;
  form.approvalRequired = approval.required === true;
  const verify = (b.verify && typeof b.verify === 'object' ? b.verify : {}) as Record<string, unknown>;
  form.verifyExpect = verify.expect === undefined ? '' : JSON.stringify(verify.expect);
  form.verifyWithin = text(verify.withinSeconds);
  return form;
}

/** A number field: its number, or the text itself (so that the schema names what is wrong), or absent. */
function numberOf(v: string): number | string | undefined {
  const t = v.trim();
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : t;
}

/**
 * A ModifyVariable's value field: JSON (`42`, `true`, `"text"`, `{"a":1}`, `null`), and text that is not
 * JSON as a string, so that `approved by Ann` needs no quotes. Empty is no value (the schema says so).
 */
export function valueOf(v: string): unknown {
  if (v.trim() === '') return undefined;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

const splitLines = (v: string) =>
  v
    .split(/\r?\n/)
    .map((s) => s.trim())
    .filter((s) => s !== '');

/** A filter row's fields that were filled in, trimmed (a field left empty is no constraint). */
const givenFields = (row: Record<string, string>) =>
  Object.fromEntries(
    Object.entries(row)
      .filter(([, v]) => v.trim() !== '')
      .map(([k, v]) => [k, v.trim()]),
  );

/** The submit body the form says, with only what was filled in (absent means no constraint). */
export function bodyFromForm(form: PlanForm): Record<string, unknown> {
  const filter: Record<string, unknown> = {};
  for (const { key } of LIST_FIELDS) {
    const list = splitLines(form.lists[key]);
    if (list.length) filter[key] = list;
  }
  if (form.searchTerm.trim() !== '') filter.searchTerm = form.searchTerm.trim();
  if (form.statuses.length) filter.statuses = form.statuses;
  if (form.subStatuses.length) filter.subStatuses = form.subStatuses;
  if (form.hasIncidents) filter.hasIncidents = form.hasIncidents === 'true';
  if (form.isSystem) filter.isSystem = form.isSystem === 'true';
  if (form.activityFilters.length) filter.activityFilters = form.activityFilters.map(givenFields);
  if (form.timestampFilters.length) {
    filter.timestampFilters = form.timestampFilters.map((t) => ({
      column: t.column,
      operator: t.operator,
      timestamp: t.timestamp.trim(),
    }));
  }
  if (form.incidentFilters.length) filter.incidentFilters = form.incidentFilters.map(givenFields);
  if (form.emptyFilterSelectsAll) filter.emptyFilterSelectsAll = true;
  const alterations = form.alterations.map((a) => {
    const alteration: Record<string, unknown> = { type: a.type };
    for (const f of formFieldsOf(a.type)) {
      const v = fieldValue(f, a.values[f.key] ?? '');
      if (v !== undefined || f.kind !== 'mappings') alteration[f.key] = v;
    }
    return alteration;
  });
  const body: Record<string, unknown> = {};
  if (form.id) body.id = form.id;
  body.alterations = alterations;
  body.filter = filter;
  const rollout = Object.fromEntries(
    (
      [
        ['rate', numberOf(form.rate)],
        ['canary', numberOf(form.canary)],
        ['stopOnFailureRatio', numberOf(form.stopOnFailureRatio)],
      ] as const
    ).filter(([, v]) => v !== undefined),
  );
  if (Object.keys(rollout).length) body.rollout = rollout;
  if (form.notBefore || form.windows.length) {
    body.schedule = {
      ...(form.notBefore ? { notBefore: form.notBefore } : {}),
      ...(form.windows.length
        ? { windows: form.windows.map((w) => ({ days: w.days, from: w.from, to: w.to, timeZone: w.timeZone })) }
        : {}),
    };
  }
  if (form.approvalRequired) body.approval = { required: true };
  if (form.verifyExpect || form.verifyWithin) {
    const expect = valueOf(form.verifyExpect);
    const within = numberOf(form.verifyWithin);
    body.verify = {
      ...(expect !== undefined ? { expect } : {}),
      ...(within !== undefined ? { withinSeconds: within } : {}),
    };
  }
  return body;
}

/** A field's text as its row shows the alteration's property. */
function fieldText(f: FormField, v: unknown): string {
  if (v === undefined) return '';
  if (f.kind === 'json') return JSON.stringify(v);
  if (f.kind === 'mappings')
    return Array.isArray(v)
      ? v.map((m: Record<string, unknown>) => `${text(m?.source)} -> ${text(m?.target)}`).join('\n')
      : '';
  return text(v);
}

/** The property a field's text says (absent when empty: the schema then names what is missing). */
function fieldValue(f: FormField, v: string): unknown {
  if (f.kind === 'json') return valueOf(v);
  if (f.kind === 'number') return numberOf(v);
  if (f.kind === 'mappings') {
    const mappings = splitLines(v).map(mappingOf);
    return mappings.length ? mappings : undefined;
  }
  return v.trim();
}

/**
 * One line of a Migrate's mappings, `source -> target` (or `→`): a line without an arrow is a source with an
 * empty target, which the schema then names.
 */
function mappingOf(line: string): { source: string; target: string } {
  const m = /^(.*?)\s*(?:->|→)\s*(.*)$/.exec(line);
  return m ? { source: m[1]!.trim(), target: m[2]!.trim() } : { source: line, target: '' };
}

/** A draft's mappings as the Migrate row's field shows them. */
export const mappingLines = (mappings: readonly { source: string; target: string }[]) =>
  mappings.map((m) => `${m.source} -> ${m.target}`).join('\n');

/** Plan JSON as the page shows it, and the fingerprint that tells later whether someone edited it. */
export const planJsonText = (body: unknown) => JSON.stringify(body, null, 2);
export const fingerprint = (text: string) =>
  createHash('sha256').update(text.replace(/\r\n?/g, '\n').trim()).digest('base64url');

/**
 * The form field an error's JSON pointer concerns (an id in the page), or undefined for one the form
 * cannot point at (then it is shown at Plan JSON).
 */
export function fieldIdOf(path: string): string | undefined {
  const parts = path.split('/').slice(1);
  const [top, key, index, sub] = parts;
  if (top === 'id') return 'plan-id';
  if (top === 'limit') return 'preview-limit';
  if (top === 'rollout' && key) return `r-${key}`;
  if (top === 'approval') return 'approval-required';
  if (top === 'verify') return key === 'withinSeconds' ? 'v-within' : 'v-expect';
  if (top === 'schedule') {
    if (key === 'notBefore') return 's-notBefore';
    if (key === 'windows') {
      if (index === undefined) return 'windows';
      return `w-${index}-${sub && ['from', 'to', 'timeZone'].includes(sub) ? sub : 'days'}`;
    }
    return 'schedule';
  }
  if (top === 'alterations') {
    if (key === undefined) return 'alterations';
    return index ? `a-${key}-${index}` : `a-${key}`;
  }
  if (top === 'filter' && key) {
    if ((LIST_FIELDS as readonly { key: string }[]).some((f) => f.key === key)) return `f-${key}`;
    if (key === 'activityFilters')
      return index === undefined ? 'activity-filters' : sub ? `af-${index}-${sub}` : `af-${index}-activityId`;
    if (key === 'incidentFilters')
      return index === undefined ? 'incident-filters' : sub ? `if-${index}-${sub}` : `if-${index}-activityId`;
    if (key === 'timestampFilters')
      return index === undefined ? 'timestamp-filters' : sub ? `tf-${index}-${sub}` : `tf-${index}-timestamp`;
    // No field of the form shows planJobs: said at Plan JSON, where it was typed.
    if (key === 'planJobs') return undefined;
    return `f-${key}`;
  }
  if (top === 'filter') return 'filter';
  return undefined;
}

/** Errors grouped by the field they concern (`''`: the ones shown at Plan JSON). */
export function errorsByField(errors: FieldError[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of errors) {
    // A key the API does not know has no field of the form (the form builds only known keys): a typo in typed
    // Plan JSON is said there, with its path, or nobody would see it.
    const id = (isUnknownProperty(e) ? undefined : fieldIdOf(e.path)) ?? 'plan-json';
    const message = id === 'plan-json' && e.path ? `${e.path}: ${e.message}` : e.message;
    out.set(id, out.has(id) ? `${out.get(id)}; ${message}` : message);
  }
  return out;
}
