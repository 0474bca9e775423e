import { z } from '@hono/zod-openapi';
import type { DefinitionVersion } from '../../engine/definitions.js';
import type { AlterableState } from '../../engine/instance-state.js';

/**
 * The definition versions a list of alterations can ask for, loaded before any instance is altered
 * (src/alterations/apply.ts `resolveDefinitions`): each instance's current version and the versions of its
 * definition an alteration names (`AlterationTypeSpec.definitionVersions`). The handlers then run
 * synchronously, so a batch of 1000 instances awaits its definitions once instead of once per instance and
 * alteration.
 */
export interface ResolvedDefinitions {
  byId: Map<string, DefinitionVersion>;
  /** `tenant \0 definitionId \0 version` → that version, or undefined when it does not exist. */
  byVersion: Map<string, DefinitionVersion | undefined>;
}

export const versionKey = (tenantKey: string, definitionId: string, version: number) =>
  `${tenantKey}\u0000${definitionId}\u0000${version}`;

/** The version the instance runs now (always resolved: it is the instance's own). */
export function currentDefinition(s: AlterableState, defs: ResolvedDefinitions): DefinitionVersion {
  const def = defs.byId.get(s.definitionVersionId);
  if (!def) throw new Error(`Definition version ${s.definitionVersionId} of instance ${s.id} is missing`);
  return def;
}

/** An id an alteration names (a variable's, an activity's). */
export const Identifier = z.string().min(1).max(500);

/** The request schema of one alteration type: a strict object whose `type` is the type's name. */
type TypeSchema = z.ZodObject<{ type: z.ZodLiteral<string> } & z.ZodRawShape>;

/**
 * One alteration type, declared once in its own file (src/alterations/types/): everything the service does
 * that depends on the type. src/alterations/types/index.ts puts them together; a type that lacks a member
 * does not compile, and nothing else in the code branches on an alteration's `type`.
 *
 * Previews and reverts need nothing per type: both compare the instance before and after (the parts of
 * src/alterations/undo.ts), whatever changed it.
 */
export interface AlterationTypeSpec<S extends TypeSchema = TypeSchema> {
  /** The discriminator: the name in `{"type": …}`, job logs (`{type} succeeded`) and `AlterationTypes`. */
  readonly type: z.output<S>['type'];
  /** The request schema, one branch of `AlterationSchema` (contract section 4). */
  readonly schema: S;
  /** How the `Alteration` schema's description names it: `Migrate {targetVersion}`. */
  readonly synopsis: string;
  /**
   * Applies the alteration to the in-memory state of one instance: returns undefined, or the log message
   * saying why it failed (the instance is then left as it was). The state is a copy whose `variables` and
   * `scheduled` are its own; any other array or object is shared with the state as read, so an apply replaces
   * it and never changes it in place. Synchronous: what it reads is resolved beforehand (`definitions`).
   */
  apply(s: AlterableState, alteration: z.output<S>, definitions: ResolvedDefinitions): string | undefined;
  /**
   * `apply` reads nothing of the instance but its own definition version (`currentDefinition`) and only sets
   * variables (never removes one, whatever they held): a plan of such alterations alone runs its batches as one
   * statement in Postgres (src/alterations/set-based.ts), each definition version's outcome worked out once by
   * `apply` itself on an instance that holds nothing else.
   */
  setsVariablesOnly?: true;
  /** Versions of the instance's definition, besides its own, that `apply` reads (a Migrate's target). */
  definitionVersions?(alteration: z.output<S>): number[];
  /**
   * The activity records a success closes (marked Canceled in the batch's transaction, src/alterations/apply.ts
   * `writeRecordChanges`): every Running record of the instance, or the records of one activity.
   */
  closesRecords?(alteration: z.output<S>): { of: 'instance' } | { of: 'activity'; activityId: string };
  /** What it does, in one line: the Temporal UI's summary of a plan and `wfa plans show` say it (`Migrate to version 3`). */
  summary(alteration: z.output<S>): string;
  /**
   * Its row in the console's New plan (src/console): the fields, in order, that fill its properties (none for a
   * type without any), and what the row says of it.
   */
  readonly form: { fields: readonly FormField[]; note?: string };
  /** An alteration of this type as a user writes one: the tests try every registered type with it. */
  readonly example: z.output<S>;
}

/**
 * One field of an alteration type's row in the console's New plan, filling the property `key` of the alteration:
 * `text` (trimmed), `number`, `json` (a value as JSON; text that is not JSON is taken as a string) or `mappings`
 * (`source -> target` a line, drafted from the migration draft of the version in the row's "Draft from version" to
 * the one its `draftTo` field names).
 */
export type FormField =
  | { key: string; label: string; kind: 'text' | 'number' | 'json'; hint?: string }
  | { key: string; label: string; kind: 'mappings'; draftTo: string; hint?: string };

/** Declares an alteration type (the schema's own types flow into `apply` and the rest). */
export const defineAlterationType = <S extends TypeSchema>(spec: AlterationTypeSpec<S>): AlterationTypeSpec<S> => spec;
