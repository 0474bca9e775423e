import { context, isSpanContextValid, propagation, trace, type Tracer } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ClientInterceptors } from '@temporalio/client';
import type { InjectedSinks, WorkerOptions } from '@temporalio/worker';
import type { OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry';

/** The `service.name` of the spans unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another. */
export const DEFAULT_SERVICE_NAME = 'workflow-alterations';

/**
 * OpenTelemetry traces: on when an OTLP endpoint is set (src/config.ts reads it). `tracesUrl` is where spans
 * go; `serviceName` is OTEL_SERVICE_NAME when set.
 */
export interface TracingSettings {
  tracesUrl: string | undefined;
  serviceName: string | undefined;
}

/**
 * OpenTelemetry tracing of one service (contract section 9): the API's requests, the Temporal clients'
 * calls, the workflows (their spans come out of the workflow sandbox through the `exporter` sink) and the
 * activities, one trace from a request to the activities it caused.
 */
export interface Tracing {
  /** The API's tracer: a span per request. */
  readonly tracer: Tracer;
  /** For every Temporal client of the service: starts and signals carry the active span to the workflow. */
  readonly clientInterceptors: ClientInterceptors;
  /** Added to every worker's options: a span per activity, and the sink the workflows' spans arrive in. */
  readonly workerOptions: Pick<WorkerOptions, 'interceptors' | 'sinks'>;
  /** Exports what is buffered and stops the exporter (the service's last stop). */
  shutdown(): Promise<void>;
}

/**
 * Starts tracing when an OTLP endpoint is configured or a span processor is handed in (the tests' in-memory
 * exporter); else undefined, and nothing of the OpenTelemetry SDK is loaded (the SDK and the exporter are
 * imported here, only then).
 *
 * The OpenTelemetry API keeps the active context and the propagator in process globals, and the Temporal
 * interceptors read them there: they are registered here and unregistered by `shutdown`.
 */
export async function startTracing(
  settings: TracingSettings,
  spanProcessor?: SpanProcessor,
): Promise<Tracing | undefined> {
  if (!settings.tracesUrl && !spanProcessor) return undefined;
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, resources, otelTemporal] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
    import('@temporalio/interceptors-opentelemetry'),
  ]);
  let processor = spanProcessor;
  if (!processor) {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    // Batched (OTEL_BSP_* tune it): a request never waits for the collector.
    processor = new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.tracesUrl }));
  }
  // The OTel specification's precedence: OTEL_SERVICE_NAME, then OTEL_RESOURCE_ATTRIBUTES, then our default.
  // (A Resource, as `merge` makes them; the workflow span sink asks for the class.)
  const resource = resources.Resource.default()
    .merge(new resources.Resource({ 'service.name': DEFAULT_SERVICE_NAME }))
    .merge(resources.envDetectorSync.detect())
    .merge(settings.serviceName ? new resources.Resource({ 'service.name': settings.serviceName }) : null) as Resource;
  // The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on by default); the propagators from
  // OTEL_PROPAGATORS (W3C trace context and baggage by default).
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  const tracer = provider.getTracer(DEFAULT_SERVICE_NAME);
  const options = { tracer };
  return {
    tracer,
    clientInterceptors: { workflow: [new otelTemporal.OpenTelemetryWorkflowClientInterceptor(options)] },
    workerOptions: {
      interceptors: {
        activity: [
          (ctx) => ({
            inbound: new otelTemporal.OpenTelemetryActivityInboundInterceptor(ctx, options),
            outbound: new otelTemporal.OpenTelemetryActivityOutboundInterceptor(ctx),
          }),
        ],
      },
      // Workflow spans end in the sandbox and cross to this thread with the activation's completion; they go
      // to the same processor as every other span.
      sinks: { exporter: otelTemporal.makeWorkflowExporter(processor, resource) },
    },
    async shutdown() {
      try {
        await provider.shutdown();
      } finally {
        trace.disable();
        context.disable();
        propagation.disable();
      }
    },
  };
}

/**
 * Without tracing, the workflows' span sink still exists: a workflow started by a client that traces (an API
 * node with tracing on) makes spans on a worker without it, and an unknown sink would log an error for each
 * (and fails a replay of a traced history: give `Worker.runReplayHistory` these sinks).
 */
export const ignoredWorkflowSpans: InjectedSinks<OpenTelemetrySinks> = {
  exporter: { export: { fn: () => undefined } },
};

/** A worker's options with the tracing's interceptors (outermost) and the workflow span sink added. */
export function withTracing(
  options: Partial<WorkerOptions> | undefined,
  tracing: Tracing | undefined,
): Partial<WorkerOptions> {
  const ours = tracing?.workerOptions;
  return {
    ...options,
    interceptors: {
      ...options?.interceptors,
      activity: [...(ours?.interceptors?.activity ?? []), ...(options?.interceptors?.activity ?? [])],
    },
    sinks: { ...(ours?.sinks ?? ignoredWorkflowSpans), ...options?.sinks },
  };
}

/**
 * The pino mixin: a line written while a span is active carries its `traceId` and `spanId`. Without tracing
 * the active context is always the empty root one, so this is a lookup that finds nothing. A new object
 * each time: pino assigns the line's own fields into the one returned.
 */
export function activeTraceFields(): { traceId?: string; spanId?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const spanContext = span.spanContext();
  return isSpanContextValid(spanContext) ? { traceId: spanContext.traceId, spanId: spanContext.spanId } : {};
}
