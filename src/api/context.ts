import { type BlockList, isIP } from 'node:net';
import type { Context, Hono } from 'hono';
import type { Tracer } from '@opentelemetry/api';
import type pg from 'pg';
import { type Identity, type Principal, tenantKey } from '../auth/principal.js';
import type { CachedProbes } from './health-checks.js';
import type { TokenSettings } from '../auth/tokens.js';
import type { Config } from '../config.js';
import type { ConfigCipher } from '../connections/cipher.js';
import type { DefinitionCache } from '../engine/definitions.js';
import type { Logger } from '../logger.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { TemporalLink } from '../temporal/link.js';
import type { PlanProcessing } from '../temporal/plans.js';
import type { PlanStatusListener } from '../alterations/status-listener.js';
import type { TenantCounter } from '../shares.js';
import { inNetworks, networkList, unmapped } from '../vocabulary/networks.js';

/** Everything the HTTP layer needs, handed to the app factory (no module-level singletons). */
export interface AppDeps {
  config: Pick<
    Config,
    | 'permissionModel'
    | 'maxBodyBytes'
    | 'requestBodyTimeoutMs'
    | 'requestLogLevel'
    | 'temporal'
    | 'alterations'
    | 'trustedProxies'
    | 'shares'
    | 'database'
    | 'metrics'
    | 'triggerInlineInstances'
  >;
  pool: pg.Pool;
  /** Temporal, which may come up after the API (src/temporal/link.ts). */
  temporal: TemporalLink;
  definitions: DefinitionCache;
  /** Signing key and lifetimes of access and refresh tokens. */
  tokens: TokenSettings;
  /** Encrypts connection configurations at rest (a no-op cipher when no key is configured). */
  cipher: ConfigCipher;
  logger: Logger;
  /** How plans are processed: task queue, batches, and whether the plan search attributes exist. */
  planProcessing: PlanProcessing;
  /** sha256 of ADMIN_API_KEY, when set. */
  adminApiKeyHash?: string | undefined;
  /** Wakes event streams when their plan's status changes; without it they only poll. */
  planStatus?: PlanStatusListener | undefined;
  /**
   * Per request: the pool without the tenant shares, for the short reads that must never wait behind a
   * tenant (credential checks, `/health`); set by the app, the API pool itself otherwise.
   */
  ungatedPool?: pg.Pool;
  /** How long a request waits for a database connection (its tenant's turn, then the pool's); default 5000. */
  apiAcquireTimeoutMs?: number | undefined;
  /** Aborted when the node stops: long answers (event streams) end at once instead of holding the stop up. */
  shutdown?: AbortSignal | undefined;
  /** How often an event stream reads its plan when nothing wakes it, in ms (default 500, growing to 2000). */
  planEventPollMs?: { min: number; max: number } | undefined;
  /**
   * false: no audit trail is written. Only the bench sets it, to measure what the trail costs a request; there is
   * no setting for it.
   */
  auditTrail?: boolean | undefined;
  /** The service's metrics (`GET /metrics`, request counts); without it nothing is counted or served. */
  metrics?: ServiceMetrics | undefined;
  /** In a process that runs a worker: does it poll (`GET /health/ready`)? Absent on an API-only node. */
  workerRunning?: (() => boolean) | undefined;
  /** With tracing on (src/tracing.ts): a span per request (src/api/tracing.ts). */
  tracer?: Tracer | undefined;
  /**
   * Client addresses this node saw blocked for guessing API keys, until when (ms): answered from memory
   * until the block ends (set by the app; src/api/authorize.ts).
   */
  blockedAddresses?: Map<string, number> | undefined;
  /** `GET /health/ready` and `GET /health`: the dependencies' checks, at most a second old (set by the app). */
  probes?: CachedProbes | undefined;
  /** Parts of the HTTP app beside the API with credentials of their own: the console (src/console/surface.ts). */
  surfaces?: readonly Surface[] | undefined;
}

/**
 * A part of the HTTP app mounted beside the API that authenticates its requests its own way (the console: by
 * its session cookie). The API knows it only by this shape: the process puts it in (src/service/api.ts).
 */
export interface Surface {
  /** Where its routes are mounted: `/console`. */
  path: string;
  /** Whether it authenticates a request to this path (its static assets need no credentials). */
  owns(path: string): boolean;
  /** What the request's credentials come to, found before routing as the API's are (src/api/authorize.ts). */
  identify(c: Context<AppEnv>): Promise<Identity>;
  /** Its routes; its event streams count in the API's per tenant and per node, and end with the process. */
  routes(shared: { streams: TenantCounter; shutdown?: AbortSignal | undefined }): Hono<AppEnv>;
}

export interface AppEnv {
  Variables: {
    deps: AppDeps;
    requestId: string;
    /** With tracing on, the request span's trace id: problem documents quote it instead of `requestId`. */
    traceId?: string;
    logger: Logger;
    principal: Principal;
    /** The route streams its JSON body (and ends it with a newline itself): no middleware may buffer it. */
    streamed?: boolean;
    /** What the request's credentials came to, found before routing (src/api/authorize.ts `identify`). */
    identity?: Identity;
    /** A console page's banner: what is down that its user should know (Temporal unreachable). */
    consoleBanner?: string;
  };
}

/** The storage key of the caller's tenant: every tenant-scoped query of a route uses it. */
export function callerTenant(c: { get(key: 'principal'): Pick<Principal, 'tenantId'> }): string {
  return tenantKey(c.get('principal').tenantId);
}

const trustedLists = new WeakMap<readonly string[], BlockList>();

/**
 * The client's address for throttling guesses: the socket's remote address, unless that is a reverse proxy
 * listed in TRUSTED_PROXIES; then X-Forwarded-For is read from the right (each proxy appends the address
 * it was reached from) and the first address that is not a trusted proxy is the client. Without
 * TRUSTED_PROXIES the header is ignored: any client can write it. In-process requests (tests) have no
 * socket and share one key.
 */
export function clientAddress(c: {
  env?: unknown;
  req: { header(name: string): string | undefined };
  get(key: 'deps'): Pick<AppDeps, 'config'>;
}): string {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  const socket = env?.incoming?.socket?.remoteAddress;
  if (!socket) return 'in-process';
  const proxies = c.get('deps').config.trustedProxies;
  if (proxies.length === 0) return unmapped(socket);
  let trusted = trustedLists.get(proxies);
  if (!trusted) trustedLists.set(proxies, (trusted = networkList(proxies)));
  if (!inNetworks(trusted, socket)) return unmapped(socket);
  const hops = (c.req.header('x-forwarded-for') ?? '').split(',').map((h) => bareAddress(h.trim()));
  let client = socket;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // Garbage in the header (not an address) ends the walk: the last trusted hop is all that is known.
    if (!isIP(unmapped(hop))) break;
    client = hop;
    if (!inNetworks(trusted, hop)) break;
  }
  return unmapped(client);
}

/**
 * Whether the client reached this service over HTTPS: the socket is TLS, or the socket's peer is a reverse
 * proxy listed in TRUSTED_PROXIES whose X-Forwarded-Proto (its last value: the one that proxy wrote) says
 * https. Any client can write the header, so without a trusted proxy it is ignored.
 */
export function viaHttps(c: {
  env?: unknown;
  req: { header(name: string): string | undefined };
  get(key: 'deps'): Pick<AppDeps, 'config'>;
}): boolean {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string; encrypted?: boolean } } } | undefined;
  const socket = env?.incoming?.socket;
  if (socket?.encrypted) return true;
  if (!socket?.remoteAddress || !fromTrustedProxy(c, socket.remoteAddress)) return false;
  const proto = (c.req.header('x-forwarded-proto') ?? '').split(',').pop()?.trim().toLowerCase();
  return proto === 'https';
}

/** Is `socket` (the peer's address) one of TRUSTED_PROXIES? */
export function fromTrustedProxy(c: { get(key: 'deps'): Pick<AppDeps, 'config'> }, socket: string): boolean {
  const proxies = c.get('deps').config.trustedProxies;
  if (proxies.length === 0) return false;
  let trusted = trustedLists.get(proxies);
  if (!trusted) trustedLists.set(proxies, (trusted = networkList(proxies)));
  return inNetworks(trusted, socket);
}

/** An address as proxies write it in X-Forwarded-For: `1.2.3.4`, `1.2.3.4:5678`, `[2001:db8::1]:443` or bare IPv6. */
function bareAddress(hop: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(hop);
  if (bracketed) return bracketed[1]!;
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(hop);
  return v4WithPort ? v4WithPort[1]! : hop;
}
