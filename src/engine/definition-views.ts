import { z } from '@hono/zod-openapi';
import type { DefinitionSummary, DefinitionVersion } from './definitions.js';

/** What the API shows of a definition version, defined once (routes document it; the client types it). */

export const DefinitionSchema = z
  .object({
    id: z.string().openapi({ description: 'The definition version id' }),
    definitionId: z.string(),
    version: z.number().int(),
    isLatest: z.boolean(),
    isPublished: z.boolean(),
    name: z.string().nullable(),
    description: z.string().nullable(),
    variables: z.array(z.any()),
    root: z.any(),
    options: z.object({ usableAsActivity: z.boolean() }),
    createdAt: z.string(),
  })
  .openapi('WorkflowDefinition');
export type DefinitionView = z.infer<typeof DefinitionSchema>;

/** The view of a stored version: its summary, with its variables and flowchart. */
export function definitionView(d: DefinitionVersion): DefinitionView {
  return { ...definitionSummaryView(d), variables: d.variables, root: d.root };
}

/** What a list shows of a definition's latest version: all but its flowchart and variables. */
export const DefinitionSummarySchema = DefinitionSchema.omit({ root: true, variables: true }).openapi(
  'WorkflowDefinitionSummary',
);
export type DefinitionSummaryView = z.infer<typeof DefinitionSummarySchema>;

export function definitionSummaryView(d: DefinitionSummary): DefinitionSummaryView {
  return {
    id: d.id,
    definitionId: d.definitionId,
    version: d.version,
    isLatest: d.isLatest,
    isPublished: d.isPublished,
    name: d.name,
    description: d.description,
    options: d.options,
    createdAt: d.createdAt.toISOString(),
  };
}
