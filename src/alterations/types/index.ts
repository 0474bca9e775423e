import { z } from '@hono/zod-openapi';
import { cancel } from './cancel.js';
import { cancelActivity } from './cancel-activity.js';
import { migrate } from './migrate.js';
import { modifyVariable } from './modify-variable.js';
import { scheduleActivity } from './schedule-activity.js';
import type { AlterationTypeSpec } from './spec.js';

export type { AlterationTypeSpec, FormField, ResolvedDefinitions } from './spec.js';

/** Keys each spec by its own name: an entry whose key is not its spec's `type` does not compile. */
const byName = <R extends { [K in keyof R]: AlterationTypeSpec & { readonly type: K } }>(types: R): R => types;

/**
 * Every alteration type, by name, in the order the API documents them. Adding one is its own file (an
 * `AlterationTypeSpec`, whose members are all required) and a line here: its schema joins `AlterationSchema`,
 * and applying, logging, summarizing and searching plans find it here.
 */
export const ALTERATION_TYPES = byName({
  ModifyVariable: modifyVariable,
  Migrate: migrate,
  ScheduleActivity: scheduleActivity,
  CancelActivity: cancelActivity,
  Cancel: cancel,
});

type Spec = (typeof ALTERATION_TYPES)[keyof typeof ALTERATION_TYPES];
const specs: Spec[] = Object.values(ALTERATION_TYPES);
const synopses = specs.map((t) => t.synopsis);

/** An alteration as a request carries it: `type` is the discriminator (contract section 4). */
export const AlterationSchema = z
  .discriminatedUnion('type', specs.map((t) => t.schema) as [Spec['schema'], ...Spec['schema'][]])
  .openapi('Alteration', {
    description: `${synopses.slice(0, -1).join(', ')} or ${synopses.at(-1)}`,
  });
export type Alteration = z.infer<typeof AlterationSchema>;
export type AlterationType = Alteration['type'];

/** The spec of an alteration's type, to be given that alteration. */
export const specOf = (alteration: Alteration): AlterationTypeSpec => ALTERATION_TYPES[alteration.type];
