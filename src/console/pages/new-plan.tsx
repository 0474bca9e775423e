import { mayReadInstances } from '../../api/authorize.js';
import { type Context, Hono } from 'hono';
import type { Child } from 'hono/jsx';
import type { z } from '@hono/zod-openapi';
import { countInstances } from '../../alterations/filter.js';
import { type ApprovalPolicy, getPolicy } from '../../alterations/governance.js';
import { FilterSchema } from '../../alterations/model.js';
import { previewPlan, previewShown } from '../../alterations/preview.js';
import type { PreviewItem } from '../../alterations/views.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { submitPlanCommand } from '../../api/plan-commands.js';
import type { Problem } from '../../api/problem.js';
import { PreviewSchema, SubmitSchema } from '../../api/routes/alterations.js';
import { INSTANCE_STATUSES, INSTANCE_SUB_STATUSES } from '../../engine/instance-state.js';
import { ALTERATIONS_EXECUTE, DEFINITIONS_VIEW } from '../../auth/route-permissions.js';
import { loadMigrationDraft } from '../../engine/migration-draft.js';
import { DomainError, type FieldError, zodFieldErrors } from '../../errors.js';
import { inputViolations } from '../../vocabulary/input.js';
import { FieldError as FieldErrorText, invalid, NotAllowed, ProblemBox, problemOf } from '../components.js';
import { field, readForm } from '../form.js';
import { plural } from '../format.js';
import { PreviewResult } from '../governance.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import {
  ACTIVITY_STATUSES,
  ALTERATION_TYPES,
  type AlterationRow,
  bodyFromForm,
  DEFAULT_TIME_ZONE,
  emptyAlteration,
  emptyForm,
  errorsByField,
  fingerprint,
  formFromBody,
  formFromFields,
  LIST_FIELDS,
  mappingLines,
  MAX_ACTIVITY_FILTERS,
  MAX_ALTERATIONS,
  MAX_TIMESTAMP_FILTERS,
  MAX_WINDOWS,
  type PlanForm,
  planJsonText,
  TIMESTAMP_COLUMNS,
  TIMESTAMP_OPERATORS,
  WEEKDAYS,
} from '../plan-form.js';
import { may, permissionName, requirePermission, type ShellOf } from '../shell.js';

/** What the last button asked for, and what came of it. */
interface Outcome {
  /** The field to focus when the page comes back (the new row's first field, a result, the first error). */
  focus?: string | undefined;
  dryRunCount?: number | undefined;
  preview?: { matchedCount: number; items: PreviewItem[] } | undefined;
  problem?: Problem | undefined;
  errors: Map<string, string>;
  /** Said at Plan JSON: it was used, or it could not be. */
  jsonNote?: string | undefined;
  /** Said under a Migrate row whose mappings were drafted: what was mapped, what is left unmapped. */
  drafts?: Map<number, string>;
}

interface View {
  shell: Shell;
  form: PlanForm;
  /** Plan JSON as shown: what the form builds, or what was typed when it could not be used. */
  json: string;
  /** Plan JSON is what the next press uses, as if edited (typed JSON the form cannot show whole). */
  jsonInCharge?: boolean;
  outcome: Outcome;
  /** The tenant's approval policy, said beside "Ask for approval". */
  policy: ApprovalPolicy;
}

const HINT_LIST = 'One per line.';

function TextField(props: {
  id: string;
  label: string;
  value: string;
  errors: Map<string, string>;
  hint?: string;
  type?: string;
  focus?: string | undefined;
  inputmode?: 'numeric' | 'decimal';
}) {
  const error = props.errors.get(props.id);
  const hintId = props.hint ? `${props.id}-hint` : undefined;
  return (
    <div>
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        name={props.id}
        type={props.type ?? 'text'}
        value={props.value}
        inputmode={props.inputmode}
        autofocus={props.focus === props.id}
        {...invalid(props.id, error)}
        aria-describedby={[error ? `${props.id}-error` : '', hintId ?? ''].filter(Boolean).join(' ') || undefined}
      />
      <FieldErrorText id={props.id} message={error} />
      {props.hint ? <small id={hintId}>{props.hint}</small> : null}
    </div>
  );
}

function ListField(props: { id: string; label: string; value: string; errors: Map<string, string> }) {
  const error = props.errors.get(props.id);
  return (
    <div>
      <label for={props.id}>{props.label}</label>
      <textarea
        id={props.id}
        name={props.id}
        rows={2}
        {...invalid(props.id, error)}
        aria-describedby={[error ? `${props.id}-error` : '', `${props.id}-hint`].filter(Boolean).join(' ')}
      >
        {props.value}
      </textarea>
      <FieldErrorText id={props.id} message={error} />
      <small id={`${props.id}-hint`}>{HINT_LIST}</small>
    </div>
  );
}

function Checkboxes(props: {
  id: string;
  legend: string;
  name: string;
  choices: readonly string[];
  checked: string[];
  errors: Map<string, string>;
}) {
  const error = props.errors.get(props.id);
  return (
    <fieldset id={props.id} {...invalid(props.id, error)}>
      <legend>{props.legend}</legend>
      {props.choices.map((choice) => (
        <label>
          <input type="checkbox" name={props.name} value={choice} checked={props.checked.includes(choice)} /> {choice}
        </label>
      ))}
      <FieldErrorText id={props.id} message={error} />
    </fieldset>
  );
}

function TriSelect(props: { id: string; label: string; value: string; yes: string; no: string }) {
  return (
    <div>
      <label for={props.id}>{props.label}</label>
      <select id={props.id} name={props.id}>
        <option value="" selected={props.value === ''}>
          Any
        </option>
        <option value="true" selected={props.value === 'true'}>
          {props.yes}
        </option>
        <option value="false" selected={props.value === 'false'}>
          {props.no}
        </option>
      </select>
    </div>
  );
}

function Select(props: { id: string; label: string; value: string; choices: readonly string[]; any?: string }) {
  return (
    <div>
      <label for={props.id}>{props.label}</label>
      <select id={props.id} name={props.id}>
        {props.any !== undefined ? (
          <option value="" selected={props.value === ''}>
            {props.any}
          </option>
        ) : null}
        {props.choices.map((c) => (
          <option value={c} selected={props.value === c}>
            {c}
          </option>
        ))}
      </select>
    </div>
  );
}

function FilterFields(props: { form: PlanForm; errors: Map<string, string>; focus?: string | undefined }) {
  const { form, errors } = props;
  const activityRows = [...form.activityFilters, { activityId: '', nodeId: '', name: '', status: '' }].slice(
    0,
    MAX_ACTIVITY_FILTERS,
  );
  const timestampRows = [
    ...form.timestampFilters,
    { column: 'CreatedAt', operator: 'GreaterThan', timestamp: '' },
  ].slice(0, MAX_TIMESTAMP_FILTERS);
  return (
    <fieldset>
      <legend>
        <strong>Which instances</strong> (the filter: every field that is filled in must match)
      </legend>
      <FieldErrorText id="filter" message={errors.get('filter')} />
      <div class="inline-fields">
        {LIST_FIELDS.slice(0, 3).map((f) => (
          <ListField id={`f-${f.key}`} label={f.label} value={form.lists[f.key]} errors={errors} />
        ))}
      </div>
      <TextField
        id="f-searchTerm"
        label="Search term"
        value={form.searchTerm}
        errors={errors}
        hint="Part of the id, name, correlation id, definition id or definition version id; any case."
      />
      <div class="inline-fields">
        <Checkboxes
          id="f-statuses"
          legend="Statuses"
          name="f-statuses"
          choices={INSTANCE_STATUSES}
          checked={form.statuses}
          errors={errors}
        />
        <Checkboxes
          id="f-subStatuses"
          legend="Sub-statuses"
          name="f-subStatuses"
          choices={INSTANCE_SUB_STATUSES}
          checked={form.subStatuses}
          errors={errors}
        />
      </div>
      <details
        open={Boolean(
          form.lists.names ||
          form.lists.definitionVersionIds ||
          form.hasIncidents ||
          form.isSystem ||
          form.activityFilters.length ||
          form.timestampFilters.length,
        )}
      >
        <summary>More filters</summary>
        <div class="inline-fields">
          {LIST_FIELDS.slice(3).map((f) => (
            <ListField id={`f-${f.key}`} label={f.label} value={form.lists[f.key]} errors={errors} />
          ))}
        </div>
        <div class="inline-fields">
          <TriSelect
            id="f-hasIncidents"
            label="Incidents"
            value={form.hasIncidents}
            yes="With incidents"
            no="Without incidents"
          />
          <TriSelect
            id="f-isSystem"
            label="System instances"
            value={form.isSystem}
            yes="Only system instances"
            no="No system instances"
          />
        </div>
        <FilterRows
          id="activity-filters"
          legend="Activity filters (an instance matches when it has an activity record matching every field of a row)"
          rowLegend="Activity filter"
          rows={activityRows}
          errors={errors}
          fields={(row, i) => (
            <>
              <TextField id={`af-${i}-activityId`} label="Activity id" value={row.activityId} errors={errors} />
              <TextField id={`af-${i}-nodeId`} label="Node id" value={row.nodeId} errors={errors} />
              <TextField id={`af-${i}-name`} label="Activity name" value={row.name} errors={errors} />
              <Select
                id={`af-${i}-status`}
                label="Activity status"
                value={row.status}
                choices={ACTIVITY_STATUSES}
                any="Any"
              />
            </>
          )}
        />
        <FilterRows
          id="timestamp-filters"
          legend="Timestamp filters"
          rowLegend="Timestamp filter"
          rows={timestampRows}
          errors={errors}
          fields={(row, i) => (
            <>
              <Select id={`tf-${i}-column`} label="Timestamp" value={row.column} choices={TIMESTAMP_COLUMNS} />
              <Select id={`tf-${i}-operator`} label="Comparison" value={row.operator} choices={TIMESTAMP_OPERATORS} />
              <TextField
                id={`tf-${i}-timestamp`}
                label="Date and time"
                value={row.timestamp}
                errors={errors}
                hint="ISO 8601 with offset, e.g. 2026-11-22T04:30:00Z"
              />
            </>
          )}
        />
      </details>
      <label>
        <input
          type="checkbox"
          name="f-emptyFilterSelectsAll"
          value="true"
          checked={form.emptyFilterSelectsAll}
          aria-describedby="f-emptyFilterSelectsAll-hint"
        />{' '}
        An empty filter selects every instance
      </label>
      <small id="f-emptyFilterSelectsAll-hint">
        Without this, a filter with nothing filled in selects nothing: a forgotten field never alters everything.
      </small>
    </fieldset>
  );
}

/** A fieldset of filter rows, each its own fieldset named by its number (the rows' fields given by `fields`). */
function FilterRows<R>(props: {
  id: string;
  legend: string;
  rowLegend: string;
  rows: readonly R[];
  errors: Map<string, string>;
  fields: (row: R, index: number) => Child;
}) {
  return (
    <fieldset id={props.id}>
      <legend>{props.legend}</legend>
      <FieldErrorText id={props.id} message={props.errors.get(props.id)} />
      {props.rows.map((row, i) => (
        <fieldset class="row">
          <legend>{`${props.rowLegend} ${i + 1}`}</legend>
          <div class="inline-fields">{props.fields(row, i)}</div>
        </fieldset>
      ))}
    </fieldset>
  );
}

function AlterationFields(props: {
  row: AlterationRow;
  index: number;
  errors: Map<string, string>;
  focus?: string | undefined;
  draft?: string | undefined;
}) {
  const { row, index: i, errors } = props;
  const id = (k: string) => `a-${i}-${k}`;
  const rowError = [errors.get(`a-${i}`), errors.get(id('type'))].filter(Boolean).join('; ') || undefined;
  return (
    <fieldset class="alteration" id={`a-${i}`}>
      <legend>{`${i + 1}. ${row.type}`}</legend>
      <input type="hidden" name={id('type')} value={row.type} />
      <FieldErrorText id={`a-${i}`} message={rowError} />
      <div class="inline-fields">
        {row.type === 'ModifyVariable' ? (
          <>
            <TextField
              id={id('variableId')}
              label="Variable id"
              value={row.variableId}
              errors={errors}
              focus={props.focus}
            />
            <TextField
              id={id('value')}
              label="New value"
              value={row.value}
              errors={errors}
              hint='JSON (42, true, "text", null); other text is taken as a string.'
            />
          </>
        ) : null}
        {row.type === 'Migrate' ? (
          <TextField
            id={id('targetVersion')}
            label="Target version"
            type="number"
            inputmode="numeric"
            value={row.targetVersion}
            errors={errors}
            focus={props.focus}
          />
        ) : null}
        {row.type === 'Migrate' ? (
          <TextField
            id={id('draftFrom')}
            label="Draft from version"
            type="number"
            inputmode="numeric"
            value={row.draftFrom}
            errors={errors}
            hint="The version the instances run now: Draft mappings proposes where each of its activities goes."
          />
        ) : null}
        {row.type === 'ScheduleActivity' || row.type === 'CancelActivity' ? (
          <TextField
            id={id('activityId')}
            label="Activity id"
            value={row.activityId}
            errors={errors}
            focus={props.focus}
          />
        ) : null}
        {row.type === 'Cancel' ? <p>Cancels the instance: its bookmarks and scheduled work are removed.</p> : null}
      </div>
      {row.type === 'Migrate' ? (
        <>
          <MappingsField id={id('activityMappings')} value={row.activityMappings} errors={errors} focus={props.focus} />
          {props.draft ? (
            <p class="wrap" role="status" id={`${id('activityMappings')}-draft`}>
              {props.draft}
            </p>
          ) : null}
          <button type="submit" name="action" value={`draft:${i}`} class="secondary outline">
            {`Draft mappings for alteration ${i + 1}`}
          </button>
        </>
      ) : null}
      <button type="submit" name="action" value={`remove:${i}`} class="secondary" formnovalidate>
        {`Remove alteration ${i + 1}`}
      </button>
    </fieldset>
  );
}

/** A Migrate's activity mappings, one a line, as the migration draft proposes them and people edit them. */
function MappingsField(props: { id: string; value: string; errors: Map<string, string>; focus?: string | undefined }) {
  const error = props.errors.get(props.id);
  return (
    <div>
      <label for={props.id}>Activity mappings</label>
      <textarea
        id={props.id}
        name={props.id}
        rows={3}
        spellcheck={false}
        autofocus={props.focus === props.id}
        {...invalid(props.id, error)}
        aria-describedby={[error ? `${props.id}-error` : '', `${props.id}-hint`].filter(Boolean).join(' ')}
      >
        {props.value}
      </textarea>
      <FieldErrorText id={props.id} message={error} />
      <small id={`${props.id}-hint`}>
        One per line, <code>source -&gt; target</code> (activity ids): where each activity an instance waits in, has
        scheduled or runs goes in the target version. An activity not named keeps its id.
      </small>
    </div>
  );
}

/** When the plan may run (section 10): not before an instant, and only inside weekly windows. */
function ScheduleFields(props: { form: PlanForm; errors: Map<string, string> }) {
  const { form, errors } = props;
  const rows = [...form.windows, { days: [], from: '', to: '', timeZone: DEFAULT_TIME_ZONE }].slice(0, MAX_WINDOWS);
  return (
    <fieldset id="schedule">
      <legend>
        <strong>Schedule</strong> (optional: when the plan may run)
      </legend>
      <FieldErrorText id="schedule" message={errors.get('schedule')} />
      <TextField
        id="s-notBefore"
        label="Not before"
        value={form.notBefore}
        errors={errors}
        hint="ISO 8601 with offset, e.g. 2026-12-01T22:00:00Z: nothing runs before it. Empty: from now."
      />
      <details open={form.windows.length > 0}>
        <summary>Maintenance windows</summary>
        <p class="muted">
          No batch starts outside every window; a batch that started inside one finishes. Outside them the plan is
          Paused (pause reason schedule) and goes on by itself when the next one opens. A window whose end is not after
          its start runs past midnight.
        </p>
        <FieldErrorText id="windows" message={errors.get('windows')} />
        {rows.map((row, i) => (
          <fieldset class="row">
            <legend>{`Maintenance window ${i + 1}`}</legend>
            <Checkboxes
              id={`w-${i}-days`}
              legend="Days"
              name={`w-${i}-days`}
              choices={WEEKDAYS}
              checked={row.days}
              errors={errors}
            />
            <div class="inline-fields">
              <TextField id={`w-${i}-from`} label="From" value={row.from} errors={errors} hint="HH:MM, e.g. 22:00" />
              <TextField id={`w-${i}-to`} label="To" value={row.to} errors={errors} hint="HH:MM, e.g. 04:00" />
              <TextField
                id={`w-${i}-timeZone`}
                label="Time zone"
                value={row.timeZone}
                errors={errors}
                hint="IANA name, e.g. Europe/Berlin"
              />
            </div>
          </fieldset>
        ))}
      </details>
    </fieldset>
  );
}

/** Seconds as people say them: `7 days`, `12 hours`, `30 minutes`. */
function duration(seconds: number): string {
  if (seconds >= 2 * 86_400) return plural(Math.round(seconds / 86_400), 'day');
  if (seconds >= 2 * 3_600) return plural(Math.round(seconds / 3_600), 'hour');
  return plural(Math.max(1, Math.round(seconds / 60)), 'minute');
}

const POLICY_TEXT: Record<ApprovalPolicy['approval'], (p: ApprovalPolicy) => string> = {
  never: () => "This tenant's policy asks for no approval.",
  always: () => "This tenant's policy asks for approval of every plan.",
  above: (p) =>
    `This tenant's policy asks for approval when the filter matches more than ${plural(p.approvalThreshold ?? 0, 'instance')}.`,
};

/** Ask for a second person's approval (section 10); the tenant's policy may ask for it anyway. */
function ApprovalFields(props: { form: PlanForm; errors: Map<string, string>; policy: ApprovalPolicy }) {
  const error = props.errors.get('approval-required');
  return (
    <fieldset id="approval">
      <legend>
        <strong>Approval</strong>
      </legend>
      <label>
        <input
          type="checkbox"
          id="approval-required"
          name="approval-required"
          value="true"
          checked={props.form.approvalRequired}
          aria-describedby="approval-required-hint"
          {...invalid('approval-required', error)}
        />{' '}
        Ask for approval by someone else
      </label>
      <FieldErrorText id="approval-required" message={error} />
      <small id="approval-required-hint">
        {`${POLICY_TEXT[props.policy.approval](props.policy)} A plan that needs approval waits, doing nothing, until a user with the permission to approve (not its submitter) approves or rejects it on Approvals; it expires after ${duration(props.policy.approvalTtlSeconds)} undecided.`}
      </small>
    </fieldset>
  );
}

function NewPlanPage(props: View) {
  const { form, outcome } = props;
  const { errors } = outcome;
  const jsonError = errors.get('plan-json');
  return (
    <Layout shell={props.shell} title="New plan" nav="new-plan">
      <h1>New plan</h1>
      <ProblemBox problem={outcome.problem} />
      <form method="post" action="/console/new-plan" id="plan-form" data-enhance="plan-json" novalidate>
        <FilterFields form={form} errors={errors} focus={outcome.focus} />
        <div class="actions">
          <button type="submit" name="action" value="dry-run">
            Dry run
          </button>
          {outcome.dryRunCount !== undefined ? (
            <p role="status" id="dry-run-result" tabindex={-1} autofocus={outcome.focus === 'dry-run-result'}>
              <strong>{`${plural(outcome.dryRunCount, 'instance')} match.`}</strong>
            </p>
          ) : null}
        </div>
        <fieldset>
          <legend>
            <strong>Alterations</strong> (applied in order to each instance, all or none)
          </legend>
          <FieldErrorText id="alterations" message={errors.get('alterations')} />
          {form.alterations.length === 0 ? <p class="muted">No alteration yet: add one.</p> : null}
          {form.alterations.map((row, i) => (
            <AlterationFields
              row={row}
              index={i}
              errors={errors}
              focus={outcome.focus}
              draft={outcome.drafts?.get(i)}
            />
          ))}
          {form.alterations.length < MAX_ALTERATIONS ? (
            <fieldset class="row">
              <legend>Add an alteration</legend>
              <div class="actions">
                {ALTERATION_TYPES.map((type) => (
                  <button type="submit" name="action" value={`add:${type}`} class="secondary outline">
                    {`Add ${type}`}
                  </button>
                ))}
              </div>
            </fieldset>
          ) : null}
        </fieldset>
        <fieldset>
          <legend>
            <strong>Rollout</strong> (optional)
          </legend>
          <div class="inline-fields">
            <TextField
              id="r-rate"
              label="Rate (instances per second)"
              value={form.rate}
              errors={errors}
              inputmode="decimal"
              hint="At most this many a second."
            />
            <TextField
              id="r-canary"
              label="Canary (instances)"
              value={form.canary}
              errors={errors}
              inputmode="numeric"
              hint="Run this many, then pause until resumed."
            />
            <TextField
              id="r-stopOnFailureRatio"
              label="Stop on failure ratio"
              value={form.stopOnFailureRatio}
              errors={errors}
              inputmode="decimal"
              hint="0 to 1: pause when failed ÷ finished exceeds it."
            />
          </div>
        </fieldset>
        <ScheduleFields form={form} errors={errors} />
        <ApprovalFields form={form} errors={errors} policy={props.policy} />
        <div class="inline-fields">
          <TextField
            id="plan-id"
            label="Plan id (optional)"
            value={form.id}
            errors={errors}
            hint="Your own id makes submitting twice harmless; empty: one is made."
          />
          <TextField
            id="preview-limit"
            label="Instances to preview"
            value={form.previewLimit}
            errors={errors}
            inputmode="numeric"
            hint="1 to 100."
          />
        </div>
        <label for="plan-json">Plan JSON</label>
        <textarea
          id="plan-json"
          name="plan-json"
          class="json"
          spellcheck={false}
          autocomplete="off"
          {...invalid('plan-json', jsonError)}
          aria-describedby={[jsonError ? 'plan-json-error' : '', 'plan-json-hint'].filter(Boolean).join(' ')}
          autofocus={outcome.focus === 'plan-json'}
        >
          {props.json}
        </textarea>
        <FieldErrorText id="plan-json" message={jsonError} />
        <small id="plan-json-hint">
          The body of <code>POST /alterations/submit</code> that the form builds. You may type or paste a whole body
          here instead: once you have changed it, Dry run, Preview and Submit plan use it, and the form takes its
          values.
          {outcome.jsonNote ? ` ${outcome.jsonNote}` : ''}
        </small>
        <input type="hidden" name="plan-json-fingerprint" value={props.jsonInCharge ? '' : fingerprint(props.json)} />
        <div class="actions">
          <button type="submit" name="action" value="preview" class="secondary">
            Preview
          </button>
          <button type="submit" name="action" value="submit">
            Submit plan
          </button>
        </div>
      </form>
      {outcome.preview ? <PreviewResult preview={outcome.preview} /> : null}
    </Layout>
  );
}

/** Validates with one of the API's schemas; its errors as field errors (JSON pointers under `prefix`). */
function validate<T extends z.ZodType>(
  schema: T,
  value: unknown,
  prefix: string[] = [],
): { ok: true; data: z.infer<T> } | { ok: false; errors: FieldError[] } {
  const violations = inputViolations(value, prefix);
  if (violations.length) return { ok: false, errors: violations };
  const parsed = schema.safeParse(value);
  return parsed.success
    ? { ok: true, data: parsed.data as z.infer<T> }
    : { ok: false, errors: zodFieldErrors(parsed.error, prefix) };
}

/** Where the form came from: the fields, or Plan JSON when it was changed since the page showed it. */
function readPosted(f: URLSearchParams): {
  form: PlanForm;
  body: unknown;
  typedJson?: string;
  jsonProblem?: FieldError[];
} {
  const typed = (f.get('plan-json') ?? '').replace(/\r\n?/g, '\n');
  const edited = typed.trim() !== '' && fingerprint(typed) !== (f.get('plan-json-fingerprint') ?? '');
  if (!edited) {
    const form = formFromFields(f);
    return { form, body: bodyFromForm(form) };
  }
  let body: unknown;
  try {
    body = JSON.parse(typed);
  } catch (err) {
    return {
      form: formFromFields(f),
      body: undefined,
      typedJson: typed,
      jsonProblem: [{ path: '', message: `Plan JSON is not JSON: ${(err as Error).message}` }],
    };
  }
  const form = formFromBody(body);
  form.previewLimit = (f.get('preview-limit') ?? '').trim() || '10';
  return { form, body, typedJson: typed };
}

/** The same JSON content, whatever the order of object keys. */
function sameContent(a: unknown, b: unknown): boolean {
  const sorted = (_key: string, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
      : v;
  return JSON.stringify(a, sorted) === JSON.stringify(b, sorted);
}

function previewLimitOf(form: PlanForm): number | string {
  const n = Number(form.previewLimit);
  return Number.isFinite(n) ? n : form.previewLimit;
}

/**
 * New plan. Each button posts the whole form and gets the page back (it works without script, and a
 * keyboard reaches everything): Add and Remove change the alterations, Dry run counts what the filter
 * matches, Preview shows what the first instances would become, Submit plan submits. Each runs what the
 * API's route runs (its schema, its domain function, its permission) for the session's principal.
 */
export function newPlanRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  const notAllowed = (c: Context<AppEnv>) =>
    renderPage(
      c,
      <Layout shell={shell(c)} title="New plan" nav="new-plan">
        <h1>New plan</h1>
        <NotAllowed what="make plans" permission={permissionName(c, ALTERATIONS_EXECUTE)} />
      </Layout>,
      403,
    );

  app.get('/new-plan', async (c) => {
    if (!may(c, ALTERATIONS_EXECUTE)) return notAllowed(c);
    const form = formFromQuery(c.req.queries());
    return renderPage(
      c,
      <NewPlanPage
        shell={shell(c)}
        form={form}
        json={planJsonText(bodyFromForm(form))}
        outcome={{ errors: new Map() }}
        policy={await getPolicy(c.get('deps').pool, callerTenant(c))}
      />,
    );
  });

  app.post('/new-plan', async (c) => {
    if (!may(c, ALTERATIONS_EXECUTE)) {
      requirePermission(c, ALTERATIONS_EXECUTE);
    }
    const f = await readForm(c);
    const action = field(f, 'action');
    const posted = readPosted(f);
    const { form } = posted;
    const outcome: Outcome = { errors: new Map() };
    let json: string | undefined;
    let jsonInCharge = false;
    const fail = (errors: readonly FieldError[]) => {
      outcome.errors = errorsByField([...errors]);
      outcome.focus = [...outcome.errors.keys()][0];
    };

    if (posted.jsonProblem) {
      fail(posted.jsonProblem);
      outcome.focus = 'plan-json';
      json = posted.typedJson;
    } else {
      // Typed Plan JSON the form cannot show whole (a key it does not know, a typo) stays what the buttons use,
      // also on the next press: never the narrower body the form would build from it.
      const whole = posted.typedJson === undefined || sameContent(bodyFromForm(form), posted.body);
      if (posted.typedJson !== undefined)
        outcome.jsonNote = whole
          ? 'The form now shows the Plan JSON you entered.'
          : 'The form cannot show all of the Plan JSON you entered: Dry run, Preview and Submit plan use Plan JSON as it stands.';
      const body = (posted.typedJson !== undefined ? posted.body : bodyFromForm(form)) as Record<string, unknown>;
      const reshapes = ['add:', 'remove:', 'draft:'].some((a) => action.startsWith(a));
      if (!whole && reshapes) {
        // Add, Remove and a draft rebuild Plan JSON from the form, which would drop what it cannot show: refused
        // until Plan JSON is mended, its problems named there.
        const checked = validate(SubmitSchema, body);
        fail(
          checked.ok
            ? [{ path: '', message: 'The form cannot show all of Plan JSON: mend it there, or clear it, first' }]
            : checked.errors,
        );
      } else if (action.startsWith('add:')) {
        const type = action.slice(4) as AlterationRow['type'];
        if ((ALTERATION_TYPES as readonly string[]).includes(type) && form.alterations.length < MAX_ALTERATIONS) {
          form.alterations.push(emptyAlteration(type));
          const i = form.alterations.length - 1;
          outcome.focus =
            type === 'ModifyVariable'
              ? `a-${i}-variableId`
              : type === 'Migrate'
                ? `a-${i}-targetVersion`
                : type === 'Cancel'
                  ? undefined
                  : `a-${i}-activityId`;
        }
      } else if (action.startsWith('remove:')) {
        form.alterations.splice(Number(action.slice(7)), 1);
      } else if (action.startsWith('draft:')) {
        const i = Number(action.slice(6));
        const row = form.alterations[i];
        if (row?.type === 'Migrate') {
          const drafted = await draftMappings(c, body, row, i);
          if ('error' in drafted) fail([drafted.error]);
          else {
            row.activityMappings = mappingLines(drafted.mappings);
            (outcome.drafts ??= new Map()).set(i, drafted.note);
            outcome.focus = `a-${i}-activityMappings`;
          }
        }
      } else if (action === 'dry-run') {
        const checked = validate(FilterSchema, body?.filter ?? {}, ['filter']);
        if (!checked.ok) fail(checked.errors);
        else {
          outcome.dryRunCount = await countInstances(c.get('deps').pool, checked.data, callerTenant(c));
          outcome.focus = 'dry-run-result';
        }
      } else if (action === 'preview') {
        const checked = validate(PreviewSchema, {
          alterations: body?.alterations,
          filter: body?.filter,
          limit: previewLimitOf(form),
        });
        if (!checked.ok) fail(checked.errors);
        else {
          const { pool, definitions } = c.get('deps');
          outcome.preview = previewShown(
            await previewPlan({ pool, definitions }, callerTenant(c), checked.data, c.req.raw.signal),
            mayReadInstances(c),
          );
          outcome.focus = 'preview-result';
        }
      } else if (action === 'submit') {
        const checked = validate(SubmitSchema, body);
        if (!checked.ok) fail(checked.errors);
        else {
          try {
            const { planId } = await submitPlanCommand(c.get('deps'), c.get('principal'), checked.data);
            return c.redirect(`/console/plans/${encodeURIComponent(planId)}?notice=submitted`, 303);
          } catch (err) {
            if (!(err instanceof DomainError)) throw err;
            outcome.problem = await problemOf(err, c);
            if (err.errors?.length) fail(err.errors);
          }
        }
      }
      // Add, Remove and a draft change the form: Plan JSON follows it. Otherwise it shows the body that was used.
      const changed = whole && reshapes;
      json = planJsonText(changed ? bodyFromForm(form) : body);
      jsonInCharge = !whole;
    }
    const status = outcome.problem ? outcome.problem.status : outcome.errors.size ? 400 : 200;
    if (outcome.errors.size && !outcome.problem) {
      outcome.problem = {
        type: '/problems/bad-request',
        title: 'Bad Request',
        status: 400,
        detail: 'The plan is not valid; see the fields marked',
        errors: [],
      };
    }
    return renderPage(
      c,
      <NewPlanPage
        shell={shell(c)}
        form={form}
        json={json ?? ''}
        jsonInCharge={jsonInCharge}
        outcome={outcome}
        policy={await getPolicy(c.get('deps').pool, callerTenant(c))}
      />,
      status as 200 | 400,
    );
  });

  /** What the form builds, for the script to keep Plan JSON in step while someone types. */
  app.post('/new-plan/json', async (c) => {
    requirePermission(c, ALTERATIONS_EXECUTE);
    const form = formFromFields(await readForm(c));
    const json = planJsonText(bodyFromForm(form));
    return c.json({ json, fingerprint: fingerprint(json) }, 200);
  });
  return app;
}

/**
 * A first draft of a Migrate row's mappings (`GET /workflow-definitions/{definitionId}/migration-draft`'s
 * code and permission): from the row's "Draft from version" to its target version, for the one definition
 * the filter names. Answers the mappings and what to tell the user, or the error to show at the row.
 */
async function draftMappings(
  c: Context<AppEnv>,
  body: Record<string, unknown> | undefined,
  row: AlterationRow,
  i: number,
): Promise<{ mappings: { source: string; target: string }[]; note: string } | { error: FieldError }> {
  const at = (field: string, message: string) => ({ error: { path: `/alterations/${i}/${field}`, message } });
  if (!may(c, DEFINITIONS_VIEW))
    return at('draftFrom', `Drafting mappings requires the permission "${permissionName(c, DEFINITIONS_VIEW)}"`);
  const filter = (body?.filter ?? {}) as { definitionIds?: unknown };
  const ids = Array.isArray(filter.definitionIds) ? filter.definitionIds : [];
  if (ids.length !== 1 || typeof ids[0] !== 'string')
    return at('draftFrom', 'Drafting mappings needs exactly one definition id in the filter (Definition ids)');
  const from = Number(row.draftFrom);
  const to = Number(row.targetVersion);
  if (!Number.isInteger(from) || from < 1)
    return at('draftFrom', 'The version to draft from: a whole number, 1 or more');
  if (!Number.isInteger(to) || to < 1) return at('targetVersion', 'The target version: a whole number, 1 or more');
  try {
    const draft = await loadMigrationDraft(c.get('deps').pool, callerTenant(c), ids[0], from, to);
    const unmapped = draft.unmapped.map((u) => `${u.activityId} (${u.type}${u.name ? ` "${u.name}"` : ''})`);
    const note =
      `Drafted from version ${from} to ${to}: ${plural(draft.mappings.length, 'activity', 'activities')} mapped ` +
      `(${draft.mappings.filter((m) => m.reason === 'sameId').length} by the same id, ` +
      `${draft.mappings.filter((m) => m.reason === 'sameTypeAndName').length} by the same type and name). ` +
      (unmapped.length
        ? `Unmapped, to map by hand (an instance waiting in one fails the migration): ${unmapped.join(', ')}.`
        : 'Nothing is left unmapped.');
    return { mappings: draft.mappings, note };
  } catch (err) {
    if (err instanceof DomainError && err.status === 404) return at('draftFrom', err.message);
    throw err;
  }
}

/**
 * New plan as Instances' "Alter these" opens it: the list's filter (definition, status, sub-status,
 * correlation id, search term: each means in a plan's filter what it means in the list), or an instance.
 * A list without a filter shows every instance, so its plan's filter selects every instance too.
 */
export function formFromQuery(q: Record<string, string[]>): PlanForm {
  const form = emptyForm();
  const one = (k: string) => (q[k]?.[0] ?? '').trim();
  if (one('definitionId')) form.lists.definitionIds = one('definitionId');
  if (one('correlationId')) form.lists.correlationIds = one('correlationId');
  if (q.workflowInstanceId?.length) form.lists.workflowInstanceIds = q.workflowInstanceId.join('\n');
  if (one('status')) form.statuses = [one('status')];
  if (one('subStatus')) form.subStatuses = [one('subStatus')];
  if (one('searchTerm')) form.searchTerm = one('searchTerm');
  if (one('from') === 'instances' && !Object.keys(bodyFromForm(form).filter as object).length)
    form.emptyFilterSelectsAll = true;
  return form;
}
