import { z } from '@hono/zod-openapi';

/** What the API takes and shows of connections, defined once (routes document them; the client types them). */

export const ConnectionRequestSchema = z
  .strictObject({
    name: z.string().max(200),
    description: z.string().max(2000).nullish(),
    connectionType: z
      .string()
      .max(500)
      .openapi({ description: 'A type name exactly as GET /connection-configuration/descriptors gives it' }),
    connectionConfiguration: z
      .record(z.string(), z.unknown())
      .openapi({ description: "Validated by the connection type's schema" }),
  })
  .openapi('ConnectionRequest');

export const ConnectionSchema = z
  .object({
    id: z.string(),
    tenantId: z.string().nullable(),
    name: z.string(),
    description: z.string().nullable(),
    connectionType: z.string(),
    connectionConfiguration: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi('Connection');
export type ConnectionView = z.infer<typeof ConnectionSchema>;
