import net from 'node:net';
import { DefaultLogger, type LogLevel, Runtime, type RuntimeOptions } from '@temporalio/worker';
import { type Logger, serializeError } from '../logger.js';

const LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The SDK's warning that a worker has no workflows to poll for is how the batches and calls workers are meant
 * to be (they run activities only, src/temporal/worker.ts): said at every start, it would read as a fault. Debug.
 */
const EXPECTED_WARNINGS = new Set(['No workflows registered, not polling for workflow tasks']);

export function levelOf(level: LogLevel, message: string): (typeof LEVELS)[LogLevel] {
  return level === 'WARN' && EXPECTED_WARNINGS.has(message) ? 'debug' : LEVELS[level];
}

/** What the process's Temporal runtime offers the service. */
export interface TemporalRuntime {
  /**
   * Where the SDK's own Prometheus exporter serves its metrics (worker slots, poll and task latencies,
   * `temporal_…`), on loopback only: `GET /metrics` appends what it reads there. Undefined when the exporter
   * could not be bound (the service then serves its own metrics alone).
   */
  metricsUrl: string | undefined;
}

/** Binding attempts: the port is probed free first, but another process may take it before the SDK binds. */
const BIND_ATTEMPTS = 5;

// The SDK's runtime is a process singleton; this is the one installed here, and what it offers.
let ours: { runtime: Runtime; offers: TemporalRuntime } | undefined;
let installing: Promise<TemporalRuntime> | undefined;

/**
 * Installs the Temporal SDK's runtime, before any NativeConnection exists (a connection made first would
 * instantiate a default runtime, without the exporter): the SDK's own logs go to our structured logger at
 * WARN and above (so that bundler chatter does not drown the service's lines), and its metrics to a
 * Prometheus exporter on a free loopback port, read by `GET /metrics`. Every service of the process (tests
 * start several) shares it. The SDK shuts its runtime down once the process's last connection and worker
 * have closed; re-created implicitly it would bind the same port again, which an outgoing connection may
 * have taken meanwhile (it is in the ephemeral range), so a service started after that installs a new one.
 */
export function installTemporalRuntime(logger: Logger): Promise<TemporalRuntime> {
  if (ours && Runtime._instance === ours.runtime) return Promise.resolve(ours.offers);
  installing ??= install(logger).finally(() => {
    installing = undefined;
  });
  return installing;
}

async function install(logger: Logger): Promise<TemporalRuntime> {
  const base: RuntimeOptions = {
    // The service decides when its worker stops (src/main.ts), so the SDK installs no signal handlers.
    shutdownSignals: [],
    logger: new DefaultLogger('WARN', (entry) => {
      logger[levelOf(entry.level, entry.message)]({ temporal: withErrorsSerialised(entry.meta) }, entry.message);
    }),
  };
  let last: unknown;
  for (let attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
    const port = await freeLoopbackPort();
    try {
      // The SDK's default names (`temporal_` prefix, durations in milliseconds): those its dashboards use.
      const runtime = Runtime.install({
        ...base,
        telemetryOptions: { metrics: { prometheus: { bindAddress: `127.0.0.1:${port}` } } },
      });
      ours = { runtime, offers: { metricsUrl: `http://127.0.0.1:${port}/metrics` } };
      return ours.offers;
    } catch (err) {
      // Only the exporter's bind is worth another port; anything else is the runtime's own failure.
      if (!/prometheus/i.test((err as Error).message)) throw err;
      last = err;
    }
  }
  logger.warn(
    { err: last },
    'the Temporal SDK metrics exporter could not be bound on loopback: GET /metrics serves no temporal_ metrics',
  );
  ours = { runtime: Runtime.install(base), offers: { metricsUrl: undefined } };
  return ours.offers;
}

/** A port free on 127.0.0.1 now (the kernel's pick); the SDK binds it right after. */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The SDK puts failures in its metadata (`error`, `failure`) as Error objects, which pino would write as
 * `{}` when nested: they are turned into their type, message, stack and cause first.
 */
function withErrorsSerialised(meta: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!meta) return meta;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(meta)) out[key] = value instanceof Error ? serializeError(value) : value;
  return out;
}
