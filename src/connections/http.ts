import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { networkList, unmapped } from '../vocabulary/networks.js';
import { FIELD_VALUE, HEADER_NAME, type HttpConnectionConfiguration, reservedHeader } from './types.js';

export type HttpOutcome = { ok: true; status: number } | { ok: false; error: string };

/**
 * How an outbound call ended, for the operator's metrics (`wfa_outbound_calls_total{outcome}`): `success` a
 * 2xx answer, `http_error` another status, `refused` never sent (the method, the URL, a header or the address
 * is not allowed), `timeout` no complete answer within `timeoutMs`, `failed` anything else (no connection,
 * a body cut short, a protocol switch).
 */
export type CallOutcome = 'success' | 'http_error' | 'refused' | 'timeout' | 'failed';

/** Told of each call as it ends: its outcome, and its duration for the calls that went out. */
export interface CallObserver {
  callFinished(outcome: CallOutcome, seconds: number | undefined): void;
}

/**
 * Where activities may send requests. Loopback, link-local (cloud metadata at 169.254.169.254), private,
 * unique-local, carrier-grade NAT and unspecified addresses are refused unless an operator lists them in
 * OUTBOUND_HTTP_ALLOW_NETWORKS: a workflow author must not reach the service's own port, its database or
 * the cloud's metadata endpoint through a connection.
 */
export interface OutboundPolicy {
  /** CIDR ranges allowed although they are in a refused range (OUTBOUND_HTTP_ALLOW_NETWORKS). */
  allowNetworks: readonly string[];
}

const REFUSED_V4: [string, number][] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];
const REFUSED_V6: [string, number][] = [
  // Unspecified, loopback and IPv4-compatible (::a.b.c.d, deprecated: it can carry any IPv4 address).
  ['::', 96],
  // NAT64 (well-known and local-use prefixes): on a NAT64 network 64:ff9b::a9fe:a9fe is 169.254.169.254.
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  // Discard-only, Teredo and 6to4 carry or reach IPv4 addresses too.
  ['100::', 64],
  ['2001::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
];

const refused = (() => {
  const list = new net.BlockList();
  for (const [a, b] of REFUSED_V4) list.addSubnet(a, b, 'ipv4');
  for (const [a, b] of REFUSED_V6) list.addSubnet(a, b, 'ipv6');
  return list;
})();

/** Why an address may not be connected to, or undefined when it may. */
export function refusal(address: string, allowed: net.BlockList): string | undefined {
  const a = unmapped(address);
  const family = net.isIP(a) === 6 ? 'ipv6' : 'ipv4';
  if (!refused.check(a, family) || allowed.check(a, family)) return undefined;
  return `the address ${a} is loopback, link-local or private; list it in OUTBOUND_HTTP_ALLOW_NETWORKS to allow it`;
}

class RefusedAddress extends Error {}

/**
 * The request URL for `path` under the connection's base URL, or why there is none. The result must stay
 * under the base URL's path after normalisation: `..` and `%2e%2e` segments that climb out, encoded
 * slashes or backslashes (which a server may decode into segments) are refused, so the connection's
 * headers and token never reach another path of the host. So is what some receivers read as a dot segment
 * although URL normalisation does not: `..;` and `.;` (Tomcat and other servlet containers), escapes that
 * are escaped again (`%252e`), escapes that are not UTF-8 (overlong `%c0%ae`) and control characters (`%00`).
 */
export function targetUrl(baseUrl: string, path: string): URL | string {
  const base = new URL(baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  if (/%2f|%5c|\\/i.test(path)) return 'the path may not contain encoded slashes or backslashes';
  const pathPart = path.split(/[?#]/)[0]!;
  if (/%25/.test(pathPart)) return 'the path may not contain an escaped "%" (double encoding)';
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathPart);
  } catch {
    return 'the path has percent-escapes that are not valid UTF-8';
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(decoded)) return 'the path may not contain control characters';
  if (decoded.split('/').some((segment) => /^\.{1,2};/.test(segment)))
    return 'the path may not contain dot segments with parameters ("..;" or ".;")';
  let url: URL;
  try {
    url = new URL(path.replace(/^\/+/, ''), base);
  } catch {
    return `the path ${JSON.stringify(path)} is not a valid URL path`;
  }
  if (url.origin !== base.origin || !url.pathname.startsWith(base.pathname)) {
    return 'the path must stay under the connection base URL';
  }
  return url;
}

/** The methods Send HTTP Request may use (contract section 8): never CONNECT, TRACE or a made-up one. */
export const OUTBOUND_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** The method to send for an input value (any letter case), or undefined when it is not one of OUTBOUND_METHODS. */
export function outboundMethod(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const upper = value.toUpperCase();
  return (OUTBOUND_METHODS as readonly string[]).includes(upper) ? upper : undefined;
}

/** Why a connection's headers or bearer token cannot be sent (stored before these rules existed), or undefined. */
function unsendable(connection: HttpConnectionConfiguration): string | undefined {
  for (const [name, value] of Object.entries(connection.headers ?? {})) {
    if (!HEADER_NAME.test(name) || reservedHeader(name))
      return `the connection sets the header "${name}", which may not be sent; update the connection`;
    if (!FIELD_VALUE.test(value))
      return `the value of the connection's header "${name}" is not visible ASCII; update the connection`;
  }
  if (connection.bearerToken !== undefined && !FIELD_VALUE.test(connection.bearerToken))
    return "the connection's bearer token is not visible ASCII; update the connection";
  return undefined;
}

/**
 * Sends one request through an HTTP connection: to `path` under its base URL, with its headers, bearer
 * token and an Idempotency-Key, following no redirect. `timeoutMs` bounds the whole call (resolving the
 * name, connecting, the headers and the whole body): past it the call is cut and fails; so does an answer
 * whose body ends short of what it announced. The address is checked on what the name resolved to at
 * connect time (so a DNS answer that changes cannot slip through), and a connection failure reads the same
 * whatever its cause, so incidents do not map the network. The promise always settles.
 */
export async function sendThroughConnection(
  connection: HttpConnectionConfiguration,
  request: { method: string; path: string; body?: unknown; idempotencyKey?: string },
  policy: OutboundPolicy = { allowNetworks: [] },
  observer?: CallObserver,
): Promise<HttpOutcome> {
  const refuse = (error: string): HttpOutcome => {
    observer?.callFinished('refused', undefined);
    return { ok: false, error };
  };
  const method = outboundMethod(request.method);
  if (!method)
    return refuse(`the method ${JSON.stringify(request.method)} is not one of ${OUTBOUND_METHODS.join(', ')}`);
  const url = targetUrl(connection.baseUrl, request.path);
  if (typeof url === 'string') return refuse(url);
  const cannot = unsendable(connection);
  if (cannot) return refuse(cannot);
  const allowed = networkList(policy.allowNetworks);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) {
    const why = refusal(host, allowed);
    if (why) return refuse(why);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(connection.headers ?? {})) headers[name.toLowerCase()] = value;
  if (connection.bearerToken) headers.authorization = `Bearer ${connection.bearerToken}`;
  if (request.idempotencyKey) headers['idempotency-key'] = request.idempotencyKey;
  const hasBody = request.body !== undefined && request.body !== null;
  const body = hasBody ? (typeof request.body === 'string' ? request.body : JSON.stringify(request.body)) : undefined;
  if (body !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  const lookup: net.LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as dns.LookupAddress[];
      const bad = list.map((a) => refusal(a.address, allowed)).find(Boolean);
      if (bad) return callback(new RefusedAddress(bad), '', 4);
      if ((options as { all?: boolean }).all)
        return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
  const transport = url.protocol === 'https:' ? https : http;
  const timeoutMs = connection.timeoutMs;
  const started = performance.now();
  return new Promise<HttpOutcome>((resolve) => {
    let settled = false;
    let req: http.ClientRequest | undefined;
    const done = (o: HttpOutcome, outcome: CallOutcome = 'failed') => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      // Whatever is still open (a socket, a body still dripping) is closed: nothing outlives the call.
      req?.destroy();
      if (o.ok) outcome = o.status >= 200 && o.status < 300 ? 'success' : 'http_error';
      observer?.callFinished(outcome, outcome === 'refused' ? undefined : (performance.now() - started) / 1000);
      resolve(o);
    };
    const deadline = setTimeout(
      () => done({ ok: false, error: `no complete response within ${timeoutMs} ms` }, 'timeout'),
      timeoutMs,
    );
    try {
      req = transport.request(url, { method, headers, lookup, agent: false }, (res) => {
        res.resume();
        res.on('end', () => done({ ok: true, status: res.statusCode ?? 0 }));
        // A body that ends short of its Content-Length or its last chunk is a failed call, never a success.
        res.on('close', () => {
          if (!res.complete)
            done({ ok: false, error: `the response (status ${res.statusCode ?? 0}) was cut short before its end` });
        });
        res.on('error', () => undefined);
      });
    } catch (err) {
      // Node refuses a header it cannot send (checked above; this is the last guard).
      done({ ok: false, error: `the request could not be sent: ${(err as Error).message}` }, 'refused');
      return;
    }
    // Node hands a protocol switch (101) to these events and nothing else: without them the call never ends.
    req.on('upgrade', (_res, socket: net.Socket) => {
      socket.destroy();
      done({ ok: false, error: 'the server switched protocols (status 101); Send HTTP Request does not follow that' });
    });
    req.on('connect', (_res, socket: net.Socket) => {
      socket.destroy();
      done({ ok: false, error: 'the server answered as a tunnel; Send HTTP Request does not open tunnels' });
    });
    req.on('error', (err) => {
      if (err instanceof RefusedAddress) return done({ ok: false, error: err.message }, 'refused');
      done({ ok: false, error: `could not connect to ${url.origin}` });
    });
    if (body !== undefined) req.write(body);
    req.end();
  });
}
