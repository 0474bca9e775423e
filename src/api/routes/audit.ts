import { OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { type AuditQuery, auditLines, auditPages, listAuditEntries, verifyAuditChain } from '../../audit/trail.js';
import { namedTenant } from '../../auth/delegation.js';
import { AUDIT_VIEW } from '../../auth/route-permissions.js';
import { Timestamp } from '../../vocabulary/input.js';
import type { AppEnv } from '../context.js';
import { openAfter, sealCursor } from '../cursor.js';
import { jsonContent, PAGING, problems } from '../schemas.js';
import { secureRoute } from '../secure-route.js';
import { streamPages } from '../streamed-pages.js';
import { asWrittenJson } from '../written-json.js';

/** Section 13: who did what, provably. */
const TAGS = ['Audit'];

const AuditEntrySchema = z
  .object({
    seq: z.number().int().openapi({ description: "The entry's place in its tenant's chain: 1, 2, 3 …" }),
    at: z.string(),
    tenantId: z.string().nullable(),
    actor: z.object({
      kind: z.enum(['user', 'apiKey', 'anonymous']),
      id: z.string().nullable(),
      name: z.string().nullable(),
    }),
    action: z.string().openapi({ example: 'plan.submit' }),
    target: z.object({ kind: z.string().nullable(), id: z.string().nullable() }),
    outcome: z.number().int().openapi({ description: 'The HTTP status of the request' }),
    traceId: z.string().nullable(),
    address: z.string().nullable(),
    detail: z.record(z.string(), z.unknown()).openapi({ description: 'What changed; never a secret' }),
    prevHash: z.string(),
    hash: z.string().openapi({ description: 'SHA-256 over prevHash and the entry' }),
  })
  .openapi('AuditEntry');

const TenantQuery = z
  .string()
  .max(200)
  .optional()
  .openapi({ description: "Another tenant's trail (empty: the default tenant): for the operator only (403)" });

const listAudit = secureRoute(AUDIT_VIEW, {
  method: 'get',
  path: '/audit',
  tags: TAGS,
  summary: "The tenant's audit trail, newest first; or the whole selection as NDJSON (`format`)",
  request: {
    query: z.strictObject({
      actor: z.string().max(200).optional().openapi({ description: "An actor's id or name" }),
      action: z
        .string()
        .max(200)
        .optional()
        .openapi({ description: 'An action (`plan.approve`), or a family of them (`plan.*`)' }),
      targetId: z.string().max(500).optional(),
      from: Timestamp.optional().openapi({ description: 'Entries at or after this time' }),
      to: Timestamp.optional().openapi({ description: 'Entries before this time' }),
      tenantId: TenantQuery,
      ...PAGING,
      format: z.enum(['json', 'ndjson']).optional().openapi({
        description:
          'json (default): a page. ndjson: every entry of the selection, newest first, streamed a page at a time',
      }),
    }),
  },
  responses: {
    200: {
      description: 'A page of entries, or all of them as NDJSON (one entry a line)',
      content: {
        'application/json': {
          schema: z.object({ items: z.array(AuditEntrySchema), nextCursor: z.string().nullable() }),
        },
        'application/x-ndjson': { schema: z.string() },
      },
    },
    ...problems(400, 401, 403),
  },
});

const verifyAudit = secureRoute(AUDIT_VIEW, {
  method: 'get',
  path: '/audit/verify',
  tags: TAGS,
  summary: "Recomputes the tenant's hash chain from its oldest kept entry",
  request: { query: z.strictObject({ tenantId: TenantQuery }) },
  responses: {
    200: jsonContent(
      z
        .object({
          ok: z.boolean(),
          checked: z.number().int(),
          firstBrokenSeq: z.number().int().nullable(),
        })
        .openapi('AuditVerification'),
      'Whether every entry, link and seq holds',
    ),
    ...problems(400, 401, 403),
  },
});

export function auditRoutes() {
  const app = new OpenAPIHono<AppEnv>();
  app.openapi(listAudit, async (c) => {
    const { pool, tokens } = c.get('deps');
    const q = c.req.valid('query');
    const tenant = namedTenant(c.get('principal'), q.tenantId, 'reading the audit trail of');
    const query: AuditQuery = {
      actor: q.actor,
      action: q.action,
      targetId: q.targetId,
      from: q.from === undefined ? undefined : new Date(q.from).toISOString(),
      to: q.to === undefined ? undefined : new Date(q.to).toISOString(),
      limit: q.limit,
    };
    if (q.format === 'ndjson') return exportAudit(c, tenant, query);
    const page = await listAuditEntries(pool, tenant, { ...query, after: openAfter(tokens.key, q.after) });
    return c.json({ items: page.items, nextCursor: sealCursor(tokens.key, page.nextCursor) }, 200);
  });
  app.openapi(verifyAudit, async (c) => {
    const tenant = namedTenant(c.get('principal'), c.req.valid('query').tenantId, 'verifying the audit trail of');
    return c.json(await verifyAuditChain(c.get('deps').pool, tenant), 200);
  });
  return app;
}

/**
 * Every entry of the selection as NDJSON, a page at a time; the first page is read before the answer starts (a
 * failing query is still a problem). The API's export and the console's.
 */
export async function exportAudit(c: Context<AppEnv>, tenant: string, query: AuditQuery) {
  const pages = auditPages(c.get('deps').pool, tenant, query);
  const first = await pages.next();
  c.header('Content-Type', 'application/x-ndjson');
  c.header('Content-Disposition', 'attachment; filename="audit.ndjson"');
  c.set('streamed', true);
  return asWrittenJson(streamPages(c, first, pages, 'an audit export', { head: '', page: auditLines, tail: '' }));
}
