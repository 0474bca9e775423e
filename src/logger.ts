import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { activeTraceFields } from './tracing.js';

export type { Logger };

/** An error as a log field: its type, message, stack and cause chain (pino writes nested errors as `{}`). */
export function serializeError(err: unknown, depth = 0): Record<string, unknown> | unknown {
  if (!(err instanceof Error)) return err;
  const out: Record<string, unknown> = { type: err.name, message: err.message, stack: err.stack };
  const code = (err as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  if (err.cause !== undefined && depth < 5) out.cause = serializeError(err.cause, depth + 1);
  return out;
}

/**
 * Structured JSON logs. Credentials never reach a log line: the redaction list covers every place a
 * secret could travel (headers, bodies of identity routes, connection configurations).
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'workflow-alterations' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          '*.password',
          '*.secret',
          '*.key',
          '*.apiKey',
          '*.refreshToken',
          '*.accessToken',
          '*.bearerToken',
          '*.connectionConfiguration',
        ],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
      // A line written inside a span (a request, an activity) names its trace: `traceId`, `spanId`.
      mixin: activeTraceFields,
      // Errors are logged under `err` (the convention) or `error`: both print type, message, stack, cause.
      serializers: { err: serializeError, error: serializeError },
    },
    destination,
  );
}

/**
 * Readable lines for a person at a terminal (`npm start` in a TTY): time, level and message, the fields
 * after them, colours. Written synchronously, so the last lines before an exit are not lost. Not a TTY
 * (a supervisor, a container, a pipe): JSON lines, as `createLogger` writes by default.
 */
export function terminalStream(): pino.DestinationStream {
  return pretty({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' });
}
