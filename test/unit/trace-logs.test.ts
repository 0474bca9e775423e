import { Writable } from 'node:stream';
import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { startTracing } from '../../src/tracing.js';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      cb();
    },
  });
  return { lines, logger: createLogger('info', sink) };
}

// Log lines carry the active span's traceId (contract section 9); the mixin that adds it runs on every line.
describe('log lines and traces', () => {
  it('carry no trace outside a span, and keep each line its own fields', () => {
    const { lines, logger } = capture();
    logger.info({ first: 1 }, 'one');
    logger.warn({ err: new Error('boom') }, 'two');
    logger.info('three');
    expect(lines.map((l) => [l.msg, 'traceId' in l, 'first' in l, 'err' in l])).toEqual([
      ['one', false, true, false],
      ['two', false, false, true],
      ['three', false, false, false],
    ]);
  });

  it('carry the traceId and spanId of the span they are written in', async () => {
    const tracing = (await startTracing(
      { tracesUrl: undefined, serviceName: undefined },
      new SimpleSpanProcessor(new InMemorySpanExporter()),
    ))!;
    try {
      const { lines, logger } = capture();
      const span = tracing.tracer.startSpan('work');
      await context.with(trace.setSpan(context.active(), span), async () => {
        await Promise.resolve();
        logger.info({ step: 1 }, 'inside');
      });
      span.end();
      logger.info('after');
      const { traceId, spanId } = span.spanContext();
      expect(lines[0]).toMatchObject({ msg: 'inside', step: 1, traceId, spanId });
      expect(lines[1]).not.toHaveProperty('traceId');
    } finally {
      await tracing.shutdown();
    }
  });
});
