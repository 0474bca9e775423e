import { z } from '@hono/zod-openapi';
import { Int32 } from '../vocabulary/input.js';

/** An activity input in version 3 JSON: a direct field carrying a type name and an expression. */
export const InputValueSchema = z
  .strictObject({
    typeName: z.string().min(1),
    expression: z.strictObject({
      type: z.enum(['Literal', 'Variable']),
      value: z.unknown(),
    }),
  })
  .openapi('InputValue');

/** Fields every activity may carry besides its inputs. */
export const ACTIVITY_META_FIELDS = [
  'id',
  'type',
  'version',
  'name',
  'description',
  'resilienceStrategyId',
  'nodeId',
] as const;

export const ActivityNodeSchema = z
  .looseObject({
    id: z.string().min(1),
    type: z.string().min(1),
    version: Int32.min(1).optional(),
    name: z.string().optional(),
    description: z.string().optional(),
    nodeId: z.string().min(1).optional(),
    resilienceStrategyId: z.string().min(1).optional(),
  })
  .openapi('ActivityNode', {
    description: 'An activity. Besides these fields, each input of its type is a direct field: {typeName, expression}.',
  });

const EndpointSchema = z.strictObject({ activity: z.string().min(1), port: z.string().min(1) });

export const ConnectionSchema = z
  .strictObject({ source: EndpointSchema, target: EndpointSchema })
  .openapi('FlowConnection');

export const FlowchartSchema = z
  .strictObject({
    type: z.literal('Elsa.Flowchart'),
    id: z.string().min(1),
    start: z.string().min(1).optional(),
    activities: z.array(ActivityNodeSchema),
    connections: z.array(ConnectionSchema).default([]),
  })
  .openapi('Flowchart');

export const VariableDefinitionSchema = z
  .strictObject({
    id: z.string().min(1),
    name: z.string().optional(),
    typeName: z.string().min(1),
    value: z.unknown().optional(),
  })
  .openapi('VariableDefinition');

export const WorkflowDefinitionRequestSchema = z
  .strictObject({
    definitionId: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[A-Za-z0-9._-]+$/, 'Use letters, digits, ".", "_" or "-"')
      .optional()
      .openapi({ description: 'Stable id of the definition across versions; generated when absent.' }),
    name: z.string().max(500).optional(),
    description: z.string().max(5000).optional(),
    variables: z.array(VariableDefinitionSchema).default([]),
    options: z.strictObject({ usableAsActivity: z.boolean().default(false) }).default({ usableAsActivity: false }),
    root: FlowchartSchema,
  })
  .openapi('WorkflowDefinitionRequest');

export type WorkflowDefinitionRequest = z.infer<typeof WorkflowDefinitionRequestSchema>;
export type ActivityNode = z.infer<typeof ActivityNodeSchema>;
export type Flowchart = z.infer<typeof FlowchartSchema>;
export type FlowConnection = z.infer<typeof ConnectionSchema>;
export type VariableDefinition = z.infer<typeof VariableDefinitionSchema>;
export type InputValue = z.infer<typeof InputValueSchema>;
