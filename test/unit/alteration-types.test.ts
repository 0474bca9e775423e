import { describe, expect, it } from 'vitest';
import { AlterationSchema } from '../../src/alterations/model.js';
import { SubmitSchema } from '../../src/alterations/requests.js';
import { planSummary } from '../../src/alterations/summary.js';
import { ALTERATION_TYPES, specOf } from '../../src/alterations/types/index.js';
import { alterationText } from '../../src/cli/plan-text.js';
import { bodyFromForm, FORM_ALTERATION_TYPES, formFromBody, formFromFields } from '../../src/console/plan-form.js';
import { AlterationFields } from '../../src/console/pages/new-plan-fields.js';

/**
 * Adding an alteration type is its file and a line in src/alterations/types/index.ts: every surface finds it in
 * the registry. For each registered type this checks what each surface needs of it: its example is a valid
 * alteration, the Temporal UI's summary and `wfa plans show` name it, and the console's New plan has a row for it
 * whose fields fill every property (the example survives form and back, through the posted fields too).
 */
const types = Object.values(ALTERATION_TYPES);

describe('every registered alteration type', () => {
  it.each(types.map((t) => [t.type, t] as const))(
    '%s has what the API, the UI, the CLI and the console need',
    (type, spec) => {
      const example = AlterationSchema.parse(spec.example);
      expect(example.type).toBe(type);
      // The summary (Temporal UI, wfa) says something of its own.
      const summary = specOf(example).summary(example);
      expect(summary.startsWith(type)).toBe(true);
      expect(alterationText(example)).toBe(summary);
      expect(planSummary({ alterations: [example], filter: { definitionIds: ['d'] } })).toContain(type);
      // The console's row fills every property the example has (and no other), and gives it back as it was.
      const properties = Object.keys(example).filter((k) => k !== 'type');
      expect(spec.form.fields.map((f) => f.key).sort()).toEqual(expect.arrayContaining(properties.sort()));
      if (spec.form.fields.length === 0) expect(spec.form.note).toBeTruthy();
      const body = { alterations: [example], filter: { definitionIds: ['d'] } };
      const form = formFromBody(body);
      expect(form.alterations).toHaveLength(1);
      expect(SubmitSchema.parse(bodyFromForm(form)).alterations).toEqual([example]);
      // Posted as the page's fields name them, it comes back the same.
      const posted = new URLSearchParams({ 'f-definitionIds': 'd', 'a-0-type': type });
      for (const [key, value] of Object.entries(form.alterations[0]!.values)) posted.set(`a-0-${key}`, value);
      expect(SubmitSchema.parse(bodyFromForm(formFromFields(posted))).alterations).toEqual([example]);
      // Its row on the page: one labelled field each.
      const html = String(AlterationFields({ row: form.alterations[0]!, index: 0, errors: new Map() }));
      for (const f of spec.form.fields) {
        expect(html).toContain(`id="a-0-${f.key}"`);
        expect(html).toContain(`>${f.label}</label>`);
      }
    },
  );

  it('are all offered by New plan, in the order of the registry', () => {
    expect(FORM_ALTERATION_TYPES).toEqual(Object.keys(ALTERATION_TYPES));
  });
});
