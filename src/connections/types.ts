import { z } from 'zod';
import { HTTP_CONNECTION_TYPE, type InputDescriptor as ActivityInputDescriptor } from '../vocabulary/descriptors.js';

/** What a UI needs to render one field of a connection configuration: an activity input's descriptor, with options. */
export type InputDescriptor = Omit<ActivityInputDescriptor, 'connectionType' | 'noLog'> & {
  options?: { text: string; value: string }[];
};

/** A registered connection configuration type: its descriptor and the schema configurations must satisfy. */
export interface ConnectionType {
  type: string;
  namespace: string;
  displayName: string;
  description: string;
  schema: z.ZodObject;
}

/**
 * Headers a connection may not set: the framing and the hop-by-hop ones, which the client computes itself
 * (a `Host` of another virtual host, or two conflicting framings for request smuggling, must not be sent).
 */
export function reservedHeader(name: string): boolean {
  return /^(host|content-length|transfer-encoding|te|trailer|connection|upgrade|keep-alive|proxy-.*)$/i.test(name);
}

/** RFC 9110 field names: tokens. */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Field values as this service sends them: visible ASCII, space and tab (no CR, LF, NUL or non-ASCII). */
export const FIELD_VALUE = /^[\t\x20-\x7e]*$/;

/** Field metadata read by the descriptor derivation (zod `.meta()`). */
interface FieldMeta {
  title: string;
  description: string;
  sensitive?: boolean;
  uiHint?: string;
}
const meta = (m: FieldMeta): FieldMeta & Record<string, unknown> => ({ ...m });

const HttpConnectionSchema = z.strictObject({
  baseUrl: z
    .url({ protocol: /^https?$/, error: 'Must be an absolute http or https URL' })
    .meta(meta({ title: 'Base URL', description: 'Requests go to paths under this URL.' })),
  headers: z
    .record(
      // RFC 9110 field names are tokens, and none of the framing or hop-by-hop ones the client sets itself.
      z
        .string()
        .regex(HEADER_NAME, "Not a valid HTTP header name (letters, digits and !#$%&'*+.^_`|~- only)")
        .refine(
          (name) => !reservedHeader(name),
          'Host, Content-Length, Transfer-Encoding, TE, Trailer, Connection, Upgrade, Keep-Alive and Proxy-* headers are set by the client, not by a connection',
        ),
      z.string().regex(FIELD_VALUE, 'A header value must be visible ASCII, spaces and tabs (RFC 9110 field value)'),
    )
    .default({})
    .meta(meta({ title: 'Headers', description: 'Headers sent with every request.', uiHint: 'dictionary' })),
  bearerToken: z
    .string()
    .min(1)
    .regex(FIELD_VALUE, 'A bearer token must be visible ASCII, spaces and tabs (it is sent as a header value)')
    .optional()
    .meta(meta({ title: 'Bearer token', description: 'Sent as "Authorization: Bearer <token>".', sensitive: true })),
  timeoutMs: z
    .number()
    .int()
    .min(1)
    .max(300_000)
    .default(10_000)
    .meta(
      meta({
        title: 'Timeout (ms)',
        description:
          'How long the whole request may take (connecting, the headers and the whole body) before it fails.',
      }),
    ),
});

const SmtpConnectionSchema = z.strictObject({
  host: z
    .string()
    .min(1)
    .meta(meta({ title: 'Host', description: 'The SMTP server host name.' })),
  port: z
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(587)
    .meta(meta({ title: 'Port', description: 'The SMTP server port.' })),
  security: z
    .enum(['None', 'StartTls', 'Tls'])
    .default('StartTls')
    .meta(meta({ title: 'Security', description: 'How the connection is secured.', uiHint: 'dropdown' })),
  username: z
    .string()
    .min(1)
    .optional()
    .meta(meta({ title: 'User name', description: 'The user to sign in as.' })),
  password: z
    .string()
    .min(1)
    .optional()
    .meta(meta({ title: 'Password', description: 'The password of the user.', sensitive: true })),
  fromAddress: z.email().meta(meta({ title: 'From address', description: 'The sender address of messages.' })),
});

export const CONNECTION_TYPES: readonly ConnectionType[] = [
  {
    type: HTTP_CONNECTION_TYPE,
    namespace: 'Elsa.Connections.Http',
    displayName: 'HTTP connection',
    description: 'An HTTP API: base URL, headers and an optional bearer token, used by Send HTTP Request.',
    schema: HttpConnectionSchema,
  },
  {
    type: 'Elsa.Connections.Smtp.SmtpConnectionConfiguration',
    namespace: 'Elsa.Connections.Smtp',
    displayName: 'SMTP connection',
    description: 'An SMTP server to send e-mail through.',
    schema: SmtpConnectionSchema,
  },
];

const byType = new Map(CONNECTION_TYPES.map((t) => [t.type, t]));

export function findConnectionType(type: string): ConnectionType | undefined {
  return byType.get(type);
}

export type HttpConnectionConfiguration = z.infer<typeof HttpConnectionSchema>;

interface JsonSchemaProperty {
  type?: string;
  format?: string;
  enum?: string[];
  default?: unknown;
  title?: string;
  description?: string;
  sensitive?: boolean;
  uiHint?: string;
}

function typeNameOf(p: JsonSchemaProperty): string {
  switch (p.type) {
    case 'integer':
      return 'Int32';
    case 'number':
      return 'Double';
    case 'boolean':
      return 'Boolean';
    case 'object':
      return 'Object';
    default:
      return 'String';
  }
}

function uiHintOf(p: JsonSchemaProperty): string {
  if (p.uiHint) return p.uiHint;
  if (p.enum) return 'dropdown';
  if (p.sensitive) return 'password';
  if (p.type === 'boolean') return 'checkbox';
  if (p.type === 'object') return 'json-editor';
  return 'singleline';
}

/**
 * The input descriptors of a connection type, derived from its zod schema (through its JSON Schema):
 * one per field, in declaration order; required when it has neither a default nor `.optional()`.
 */
export function inputDescriptors(t: ConnectionType): InputDescriptor[] {
  const json = z.toJSONSchema(t.schema, { io: 'input' }) as {
    properties?: Record<string, JsonSchemaProperty>;
    required?: string[];
  };
  const required = new Set(json.required ?? []);
  return Object.entries(json.properties ?? {}).map(([name, p], order) => ({
    name,
    typeName: typeNameOf(p),
    displayName: p.title ?? name,
    description: p.description ?? '',
    uiHint: uiHintOf(p),
    isRequired: required.has(name),
    isSensitive: p.sensitive === true,
    defaultValue: p.default ?? null,
    order,
    ...(p.enum ? { options: p.enum.map((v) => ({ text: v, value: v })) } : {}),
  }));
}
