import { OpenAPIHono, z } from '@hono/zod-openapi';
import { BUILTIN_ACTIVITIES, type InputDescriptor } from '../../engine/activity-types.js';
import { listActivityDefinitions } from '../../engine/definitions.js';
import { RESILIENCE_STRATEGIES } from '../../engine/resilience.js';
import { type AppEnv, callerTenant } from '../context.js';
import { counted, InputDescriptorSchema, jsonContent, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';

/** Catalogs are readable by any signed-in principal, in both permission models. */
const SIGNED_IN = { structured: 'signed-in', legacy: 'signed-in' } as const;
const TAGS = ['Catalogs'];

export const INSTALLED_FEATURES = [
  {
    name: 'Elsa.Workflows',
    displayName: 'Workflows',
    description: 'Version 3 workflow definitions, instances and their execution on Temporal.',
  },
  {
    name: 'Elsa.Alterations',
    displayName: 'Alterations',
    description: 'Plans, dry-runs, immediate runs and retries that change existing instances.',
  },
  {
    name: 'Elsa.Connections',
    displayName: 'Connections',
    description: 'Named, tenant-aware configurations of external systems, resolved when activities run.',
  },
  { name: 'Elsa.Http', displayName: 'HTTP', description: 'Send HTTP Request through a saved HTTP connection.' },
  { name: 'Elsa.Identity', displayName: 'Identity', description: 'Users, roles, API keys, tokens and sessions.' },
  { name: 'Elsa.Resilience', displayName: 'Resilience', description: 'Retry strategies activities can name.' },
];

const features = secureRoute(SIGNED_IN, {
  method: 'get',
  path: '/features/installed',
  tags: TAGS,
  summary: 'The features this service has installed',
  responses: {
    200: jsonContent(
      counted(z.object({ name: z.string(), displayName: z.string(), description: z.string() })),
      'Features',
    ),
    ...problems(401),
  },
});

const strategies = secureRoute(SIGNED_IN, {
  method: 'get',
  path: '/resilience/strategies',
  tags: TAGS,
  summary: 'Retry strategies an activity can name with resilienceStrategyId',
  responses: {
    200: jsonContent(
      counted(
        z.object({
          id: z.string(),
          displayName: z.string(),
          maxAttempts: z.number().int(),
          initialIntervalMs: z.number().int(),
          backoffCoefficient: z.number(),
          maxIntervalMs: z.number().int(),
        }),
      ),
      'Strategies',
    ),
    ...problems(401),
  },
});

const activities = secureRoute(SIGNED_IN, {
  method: 'get',
  path: '/descriptors/activities',
  tags: ['Descriptors'],
  summary: "The built-in activities and the tenant's workflows usable as activities, with their inputs",
  responses: {
    200: jsonContent(
      counted(
        z.object({
          typeName: z.string(),
          namespace: z.string(),
          displayName: z.string(),
          description: z.string(),
          inputs: z.array(InputDescriptorSchema),
          outcomes: z.array(z.string()),
        }),
      ),
      'Activity descriptors',
    ),
    ...problems(401),
  },
});

/** The contract's InputDescriptor fields (the registry's internal markers are not part of it). */
function describeInput(d: InputDescriptor) {
  return {
    name: d.name,
    typeName: d.typeName,
    displayName: d.displayName,
    description: d.description,
    uiHint: d.uiHint,
    isRequired: d.isRequired,
    isSensitive: d.isSensitive,
    defaultValue: d.defaultValue,
    order: d.order,
  };
}

export function catalogRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(features, (c) => c.json({ items: INSTALLED_FEATURES, totalCount: INSTALLED_FEATURES.length }, 200));
  app.openapi(strategies, (c) =>
    c.json({ items: [...RESILIENCE_STRATEGIES], totalCount: RESILIENCE_STRATEGIES.length }, 200),
  );
  app.openapi(activities, async (c) => {
    const builtIn = BUILTIN_ACTIVITIES.map((a) => ({
      typeName: a.typeName,
      namespace: a.namespace,
      displayName: a.displayName,
      description: a.description,
      inputs: a.inputs.map(describeInput),
      outcomes: a.outcomes,
    }));
    const definitions = await listActivityDefinitions(c.get('deps').pool, callerTenant(c));
    const workflows = definitions.map((d) => ({
      typeName: d.definitionId,
      namespace: 'Workflows',
      displayName: d.name ?? d.definitionId,
      description: d.description ?? '',
      inputs: d.variables.map((v, order) => ({
        name: v.id,
        typeName: v.typeName,
        displayName: v.name ?? v.id,
        description: '',
        uiHint: 'singleline',
        isRequired: false,
        isSensitive: false,
        defaultValue: v.value ?? null,
        order,
      })),
      outcomes: ['Done'],
    }));
    const items = [...builtIn, ...workflows];
    return c.json({ items, totalCount: items.length }, 200);
  });
  return app;
}
