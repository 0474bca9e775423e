import { DefaultLogger, type LogLevel, Runtime } from '@temporalio/worker';
import { type Logger, serializeError } from '../logger.js';

const LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

let installed = false;

/**
 * Routes the Temporal SDK's own logs (worker, core) into our structured logger, at WARN and above so that
 * bundler chatter does not drown the service's lines. Installed once per process, before any worker.
 */
export function installTemporalRuntime(logger: Logger): void {
  if (installed) return;
  installed = true;
  Runtime.install({
    // The service decides when its worker stops (src/main.ts), so the SDK installs no signal handlers.
    shutdownSignals: [],
    logger: new DefaultLogger('WARN', (entry) => {
      logger[LEVELS[entry.level]]({ temporal: withErrorsSerialised(entry.meta) }, entry.message);
    }),
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
