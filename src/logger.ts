import { pino, type Logger } from 'pino';

export type { Logger };

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
    },
    destination,
  );
}
