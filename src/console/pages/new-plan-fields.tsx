import type { Child } from 'hono/jsx';
import { type ApprovalPolicy } from '../../alterations/governance.js';
import { INSTANCE_STATUSES, INSTANCE_SUB_STATUSES } from '../../engine/instance-state.js';
import { FieldError as FieldErrorText, invalid, Select } from '../components.js';
import { plural } from '../format.js';
import {
  ACTIVITY_STATUSES,
  type AlterationRow,
  DEFAULT_TIME_ZONE,
  LIST_FIELDS,
  MAX_ACTIVITY_FILTERS,
  MAX_TIMESTAMP_FILTERS,
  MAX_INCIDENT_FILTERS,
  MAX_WINDOWS,
  type PlanForm,
  TIMESTAMP_COLUMNS,
  TIMESTAMP_OPERATORS,
  WEEKDAYS,
} from '../plan-form.js';
import { ALTERATION_TYPES } from '../../alterations/types/index.js';

/** The fields of New plan: the filter, the alterations of each type, the schedule and the approval. */

const HINT_LIST = 'One per line.';

export function TextField(props: {
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

export function ListField(props: { id: string; label: string; value: string; errors: Map<string, string> }) {
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

/** A yes, no or any choice (`yes` and `no` label the first two). */
const yesNo = (yes: string, no: string) => [
  { value: 'true', label: yes },
  { value: 'false', label: no },
];

export function FilterFields(props: { form: PlanForm; errors: Map<string, string>; focus?: string | undefined }) {
  const { form, errors } = props;
  const activityRows = [...form.activityFilters, { activityId: '', nodeId: '', name: '', status: '' }].slice(
    0,
    MAX_ACTIVITY_FILTERS,
  );
  const timestampRows = [
    ...form.timestampFilters,
    { column: 'CreatedAt', operator: 'GreaterThan', timestamp: '' },
  ].slice(0, MAX_TIMESTAMP_FILTERS);
  const incidentRows = [...form.incidentFilters, { activityId: '', activityType: '', messageContains: '' }].slice(
    0,
    MAX_INCIDENT_FILTERS,
  );
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
          <Select
            id="f-hasIncidents"
            label="Incidents"
            value={form.hasIncidents}
            choices={yesNo('With incidents', 'Without incidents')}
            any="Any"
          />
          <Select
            id="f-isSystem"
            label="System instances"
            value={form.isSystem}
            choices={yesNo('Only system instances', 'No system instances')}
            any="Any"
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
          id="incident-filters"
          legend="Incident filters (an instance matches when it has an incident matching every field of a row, for each row)"
          rowLegend="Incident filter"
          rows={incidentRows}
          errors={errors}
          fields={(row, i) => (
            <>
              <TextField id={`if-${i}-activityId`} label="Activity id" value={row.activityId} errors={errors} />
              <TextField id={`if-${i}-activityType`} label="Activity type" value={row.activityType} errors={errors} />
              <TextField
                id={`if-${i}-messageContains`}
                label="Message contains"
                value={row.messageContains}
                errors={errors}
                hint="Case-insensitive, 1 to 200 characters"
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

export function AlterationFields(props: {
  row: AlterationRow;
  index: number;
  errors: Map<string, string>;
  focus?: string | undefined;
  draft?: string | undefined;
}) {
  const { row, index: i, errors } = props;
  const id = (k: string) => `a-${i}-${k}`;
  const rowError = [errors.get(`a-${i}`), errors.get(id('type'))].filter(Boolean).join('; ') || undefined;
  // The row is the type's spec's (src/alterations/types): its fields in order, and a Draft for its mappings.
  const { fields, note } = ALTERATION_TYPES[row.type].form;
  const plain = fields.filter((f) => f.kind !== 'mappings');
  const mappings = fields.find((f) => f.kind === 'mappings');
  return (
    <fieldset class="alteration" id={`a-${i}`}>
      <legend>{`${i + 1}. ${row.type}`}</legend>
      <input type="hidden" name={id('type')} value={row.type} />
      <FieldErrorText id={`a-${i}`} message={rowError} />
      <div class="inline-fields">
        {plain.map((f) => (
          <TextField
            id={id(f.key)}
            label={f.label}
            value={row.values[f.key] ?? ''}
            errors={errors}
            focus={props.focus}
            {...(f.kind === 'number' ? { type: 'number', inputmode: 'numeric' } : {})}
            {...(f.hint ? { hint: f.hint } : {})}
          />
        ))}
        {mappings ? (
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
        {note ? <p>{note}</p> : null}
      </div>
      {mappings ? (
        <>
          <MappingsField
            id={id(mappings.key)}
            label={mappings.label}
            value={row.values[mappings.key] ?? ''}
            errors={errors}
            focus={props.focus}
          />
          {props.draft ? (
            <p class="wrap" role="status" id={`${id(mappings.key)}-draft`}>
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
export function MappingsField(props: {
  id: string;
  label: string;
  value: string;
  errors: Map<string, string>;
  focus?: string | undefined;
}) {
  const error = props.errors.get(props.id);
  return (
    <div>
      <label for={props.id}>{props.label}</label>
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
export function ScheduleFields(props: { form: PlanForm; errors: Map<string, string> }) {
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

export const POLICY_TEXT: Record<ApprovalPolicy['approval'], (p: ApprovalPolicy) => string> = {
  never: () => "This tenant's policy asks for no approval.",
  always: () => "This tenant's policy asks for approval of every plan.",
  above: (p) =>
    `This tenant's policy asks for approval when the filter matches more than ${plural(p.approvalThreshold ?? 0, 'instance')}.`,
};

/** `verify`: the filter each changed instance must come to match, and within how long (section 12). */
export function VerifyFields(props: { form: PlanForm; errors: Map<string, string> }) {
  const { form, errors } = props;
  const error = errors.get('v-expect');
  return (
    <fieldset id="verify">
      <legend>
        <strong>Verify</strong>
      </legend>
      <p class="muted">
        After a job completes, its instance must come to match this filter within the time given; the plan says which
        did (Verified) and which did not (Unverified), and Retry failed retries those too. Leave both empty for none.
      </p>
      <div class="inline-fields">
        <div>
          <label for="v-expect">Expect (filter JSON)</label>
          <textarea
            id="v-expect"
            name="v-expect"
            rows={2}
            {...invalid('v-expect', error)}
            aria-describedby={[error ? 'v-expect-error' : '', 'v-expect-hint'].filter(Boolean).join(' ')}
          >
            {form.verifyExpect}
          </textarea>
          <FieldErrorText id="v-expect" message={error} />
          <small id="v-expect-hint">{'A filter as in Plan JSON, e.g. {"hasIncidents": false}'}</small>
        </div>
        <TextField
          id="v-within"
          label="Within (seconds)"
          value={form.verifyWithin}
          errors={errors}
          inputmode="numeric"
          hint="1 to 86400"
        />
      </div>
    </fieldset>
  );
}

/** Ask for a second person's approval (section 10); the tenant's policy may ask for it anyway. */
export function ApprovalFields(props: { form: PlanForm; errors: Map<string, string>; policy: ApprovalPolicy }) {
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
