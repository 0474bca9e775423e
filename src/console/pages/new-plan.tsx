import { noteAudit } from '../../audit/scope.js';
import { mayReadInstances } from '../../api/authorize.js';
import { type Context, Hono } from 'hono';
import type { z } from '@hono/zod-openapi';
import { checkFilterReferences, countInstances } from '../../alterations/filter.js';
import { type ApprovalPolicy, getPolicy } from '../../alterations/governance.js';
import { type Filter, FilterSchema } from '../../alterations/model.js';
import { previewPlan, previewShown } from '../../alterations/preview.js';
import type { PreviewItem } from '../../alterations/views.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { submitPlanCommand } from '../../api/plan-commands.js';
import type { Problem } from '../../api/problem.js';
import { PreviewSchema, SubmitSchema } from '../../alterations/requests.js';
import { ALTERATIONS_EXECUTE, DEFINITIONS_VIEW } from '../../auth/route-permissions.js';
import { loadMigrationDraft } from '../../engine/migration-draft.js';
import { DomainError, type FieldError, zodFieldErrors } from '../../errors.js';
import { inputViolations } from '../../vocabulary/input.js';
import { FieldError as FieldErrorText, invalid, ProblemBox, problemOf } from '../components.js';
import { field, readForm } from '../form.js';
import { plural } from '../format.js';
import { PreviewResult } from '../governance.js';
import { gate, type PageAccess } from '../gate.js';
import { Layout, renderPage, type Shell } from '../layout.js';
import {
  FORM_ALTERATION_TYPES,
  formFieldsOf,
  type AlterationRow,
  bodyFromForm,
  emptyAlteration,
  emptyForm,
  errorsByField,
  fingerprint,
  formFromBody,
  formFromFields,
  mappingLines,
  MAX_ALTERATIONS,
  type PlanForm,
  planJsonText,
} from '../plan-form.js';
import { may, permissionName, requirePermission, type ShellOf } from '../shell.js';
import {
  AlterationFields,
  ApprovalFields,
  FilterFields,
  ScheduleFields,
  TextField,
  VerifyFields,
} from './new-plan-fields.js';

/** New plan is for those who may make plans. */
const ACCESS: PageAccess = { title: 'New plan', nav: 'new-plan', what: 'make plans', permission: ALTERATIONS_EXECUTE };

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
                {FORM_ALTERATION_TYPES.map((type) => (
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
        <VerifyFields form={form} errors={errors} />
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
      {outcome.preview ? <PreviewResult preview={outcome.preview} submitForm="plan-form" /> : null}
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
  // A Plan id typed into its field counts where Plan JSON names none (else a second submit would make a second plan).
  const id = (f.get('plan-id') ?? '').trim();
  if (id && body !== null && typeof body === 'object' && !Array.isArray(body) && !('id' in body))
    body = { id, ...body };
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
  app.get('/new-plan', gate(shell, ACCESS), async (c) => {
    const form = formFromQuery(c.req.queries());
    const outcome: Outcome = { errors: new Map() };
    // Migrate these: the mappings drafted at once, to edit (a draft that cannot be made says why at its row).
    const migrate = form.alterations[0];
    if (migrate?.type === 'Migrate' && migrate.draftFrom) {
      const drafted = await draftMappings(
        c,
        { filter: { definitionIds: form.lists.definitionIds ? [form.lists.definitionIds] : [] } },
        migrate,
        0,
        'targetVersion',
      );
      if ('error' in drafted) outcome.errors = errorsByField([drafted.error]);
      else {
        migrate.values.activityMappings = mappingLines(drafted.mappings);
        outcome.drafts = new Map([[0, drafted.note]]);
      }
    }
    return renderPage(
      c,
      <NewPlanPage
        shell={shell(c)}
        form={form}
        json={planJsonText(bodyFromForm(form))}
        outcome={outcome}
        policy={await getPolicy(c.get('deps').pool, callerTenant(c))}
      />,
    );
  });

  /** The audit trail's action of each button of the form (another press only redraws it). */
  const PRESSED: Record<string, string> = { 'dry-run': 'plan.dryRun', preview: 'plan.preview', submit: 'plan.submit' };
  app.post('/new-plan', async (c) => {
    if (!may(c, ALTERATIONS_EXECUTE)) {
      requirePermission(c, ALTERATIONS_EXECUTE);
    }
    const f = await readForm(c);
    const action = field(f, 'action');
    noteAudit({ action: PRESSED[action ?? ''] ?? 'plan.draft' });
    const posted = readPosted(f);
    const { form } = posted;
    const outcome: Outcome = { errors: new Map() };
    let json: string | undefined;
    let jsonInCharge = false;
    const fail = (errors: readonly FieldError[]) => {
      outcome.errors = errorsByField([...errors]);
      outcome.focus = [...outcome.errors.keys()][0];
    };

    // What the schema cannot check (a planJobs plan of this tenant), as the API checks it: marked, and true.
    const referencesFail = async (filter: Filter): Promise<boolean> => {
      try {
        await checkFilterReferences(c.get('deps').pool, callerTenant(c), filter, '/filter');
        return false;
      } catch (err) {
        if (!(err instanceof DomainError) || !err.errors?.length) throw err;
        fail(err.errors);
        return true;
      }
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
        if (FORM_ALTERATION_TYPES.includes(type) && form.alterations.length < MAX_ALTERATIONS) {
          form.alterations.push(emptyAlteration(type));
          // The new row's first field, if its type has one.
          const first = formFieldsOf(type)[0];
          outcome.focus = first ? `a-${form.alterations.length - 1}-${first.key}` : undefined;
        }
      } else if (action.startsWith('remove:')) {
        form.alterations.splice(Number(action.slice(7)), 1);
      } else if (action.startsWith('draft:')) {
        const i = Number(action.slice(6));
        const row = form.alterations[i];
        const field = row && formFieldsOf(row.type).find((f) => f.kind === 'mappings');
        if (row && field?.kind === 'mappings') {
          const drafted = await draftMappings(c, body, row, i, field.draftTo);
          if ('error' in drafted) fail([drafted.error]);
          else {
            row.values[field.key] = mappingLines(drafted.mappings);
            (outcome.drafts ??= new Map()).set(i, drafted.note);
            outcome.focus = `a-${i}-${field.key}`;
          }
        }
      } else if (action === 'dry-run') {
        const checked = validate(FilterSchema, body?.filter ?? {}, ['filter']);
        if (!checked.ok) fail(checked.errors);
        else if (!(await referencesFail(checked.data))) {
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
        else if (!(await referencesFail(checked.data.filter))) {
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
  /** The row's field that names the version to draft to. */
  draftTo: string,
): Promise<{ mappings: { source: string; target: string }[]; note: string } | { error: FieldError }> {
  const at = (field: string, message: string) => ({ error: { path: `/alterations/${i}/${field}`, message } });
  if (!may(c, DEFINITIONS_VIEW))
    return at('draftFrom', `Drafting mappings requires the permission "${permissionName(c, DEFINITIONS_VIEW)}"`);
  const filter = (body?.filter ?? {}) as { definitionIds?: unknown };
  const ids = Array.isArray(filter.definitionIds) ? filter.definitionIds : [];
  if (ids.length !== 1 || typeof ids[0] !== 'string')
    return at('draftFrom', 'Drafting mappings needs exactly one definition id in the filter (Definition ids)');
  const from = Number(row.draftFrom);
  const to = Number(row.values[draftTo]);
  if (!Number.isInteger(from) || from < 1)
    return at('draftFrom', 'The version to draft from: a whole number, 1 or more');
  if (!Number.isInteger(to) || to < 1) return at(draftTo, 'The target version: a whole number, 1 or more');
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
  // Incidents' "Retry these" (and an instance's "Retry"): the instances with an incident at the activity whose
  // message holds the group's, the activity scheduled again, verified when no incident is left within 5 minutes.
  const faulted = one('incidentActivityId');
  if (faulted) {
    const message = one('incidentMessage').slice(0, 200);
    form.incidentFilters = [{ activityId: faulted, activityType: '', messageContains: message }];
    form.alterations = [{ ...emptyAlteration('ScheduleActivity'), values: { activityId: faulted } }];
    form.verifyExpect = JSON.stringify({ hasIncidents: false });
    form.verifyWithin = '300';
  }
  // Definitions' "Migrate these": the version's instances, a Migrate to the version named (its mappings drafted
  // by the page from `migrateFrom`).
  const from = one('migrateFrom');
  if (from && one('definitionVersionId')) {
    form.lists.definitionVersionIds = one('definitionVersionId');
    form.statuses = ['Running'];
    form.alterations = [
      {
        ...emptyAlteration('Migrate'),
        values: { targetVersion: one('migrateTo'), activityMappings: '' },
        draftFrom: from,
      },
    ];
  }
  return form;
}
