import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { HttpConnectionConfiguration } from './types.js';

export type HttpOutcome = { ok: true; status: number } | { ok: false; error: string };

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
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
];

/** Parses `10.0.0.0/8, 127.0.0.0/8, ::1/128` (a bare address is a single host). */
export function parseNetworks(list: string): string[] {
  const out: string[] = [];
  for (const raw of list.split(/[\s,]+/).filter(Boolean)) {
    const [address, bits] = raw.split('/');
    const family = net.isIP(address ?? '');
    const prefix = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits);
    if (!family || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32)) {
      throw new Error(`OUTBOUND_HTTP_ALLOW_NETWORKS: "${raw}" is not a CIDR range (such as 127.0.0.0/8)`);
    }
    out.push(`${address}/${prefix}`);
  }
  return out;
}

function blockList(ranges: readonly string[]): net.BlockList {
  const list = new net.BlockList();
  for (const r of ranges) {
    const [address, bits] = r.split('/');
    list.addSubnet(address!, Number(bits), net.isIP(address!) === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

const refused = (() => {
  const list = new net.BlockList();
  for (const [a, b] of REFUSED_V4) list.addSubnet(a, b, 'ipv4');
  for (const [a, b] of REFUSED_V6) list.addSubnet(a, b, 'ipv6');
  return list;
})();

/** The IPv4 address inside an IPv4-mapped IPv6 one (::ffff:127.0.0.1), else the address itself. */
function unmapped(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? m[1]! : address;
}

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
 * headers and token never reach another path of the host.
 */
export function targetUrl(baseUrl: string, path: string): URL | string {
  const base = new URL(baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  if (/%2f|%5c|\\/i.test(path)) return 'the path may not contain encoded slashes or backslashes';
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

/**
 * Sends one request through an HTTP connection: to `path` under its base URL, with its headers, bearer
 * token and an Idempotency-Key, within its timeout, following no redirect. The address is checked on
 * what the name resolved to at connect time (so a DNS answer that changes cannot slip through), and a
 * connection failure reads the same whatever its cause, so incidents do not map the network.
 */
export async function sendThroughConnection(
  connection: HttpConnectionConfiguration,
  request: { method: string; path: string; body?: unknown; idempotencyKey?: string },
  policy: OutboundPolicy = { allowNetworks: [] },
): Promise<HttpOutcome> {
  const url = targetUrl(connection.baseUrl, request.path);
  if (typeof url === 'string') return { ok: false, error: url };
  const allowed = blockList(policy.allowNetworks);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) {
    const why = refusal(host, allowed);
    if (why) return { ok: false, error: why };
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
  return new Promise<HttpOutcome>((resolve) => {
    let settled = false;
    const done = (o: HttpOutcome) => {
      if (!settled) {
        settled = true;
        resolve(o);
      }
    };
    const req = transport.request(
      url,
      { method: request.method.toUpperCase(), headers, lookup, agent: false, timeout: connection.timeoutMs },
      (res) => {
        res.resume();
        res.on('end', () => done({ ok: true, status: res.statusCode ?? 0 }));
        res.on('error', () => done({ ok: true, status: res.statusCode ?? 0 }));
      },
    );
    req.on('timeout', () => {
      req.destroy();
      done({ ok: false, error: `no response within ${connection.timeoutMs} ms` });
    });
    req.on('error', (err) => {
      if (err instanceof RefusedAddress) return done({ ok: false, error: err.message });
      done({ ok: false, error: `could not connect to ${url.origin}` });
    });
    if (body !== undefined) req.write(body);
    req.end();
  });
}
