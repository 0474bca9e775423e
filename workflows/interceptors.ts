import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type { WorkflowInterceptors } from '@temporalio/workflow';

/** The header the OpenTelemetry client and workflow interceptors carry the span context in. */
const TRACE_HEADER = '_tracer-data';

/**
 * The span context a start, signal or query carried, when the sampler kept its trace (W3C `traceparent`,
 * flag 01); a context of another format counts as kept, as the SDK's interceptors would treat it.
 */
function sampledTrace(headers: Record<string, Payload>): boolean {
  const header = headers[TRACE_HEADER];
  if (!header) return false;
  const carrier = defaultPayloadConverter.fromPayload<Record<string, unknown> | null>(header);
  const traceparent = carrier?.traceparent;
  if (typeof traceparent !== 'string') return true;
  const flags = Number.parseInt(traceparent.slice(-2), 16);
  return Number.isNaN(flags) || (flags & 1) === 1;
}

interface Otel {
  inbound: OpenTelemetryInboundInterceptor;
  outbound: OpenTelemetryOutboundInterceptor;
  internals: OpenTelemetryInternalsInterceptor;
}

/**
 * The workflow interceptors every bundle of this service includes (`workflowInterceptorModules`, see
 * src/temporal/bundle.ts): the Temporal SDK's OpenTelemetry interceptors, for the runs that carry a trace.
 *
 * A run is traced when its start carried a sampled span context (a client of the service with tracing on
 * started it, or a traced run continued as new into it): then its run, its activities and its continue-as-new
 * are spans of that trace, exported through the `exporter` sink. A signal, an update or a query is traced
 * when it carries a sampled span context itself. A run whose trace the sampler left out
 * (OTEL_TRACES_SAMPLER) makes no span: it hands the context it was given on to its activities, its next run
 * and what it signals, so that they leave it out too instead of starting traces of their own. Everything
 * else passes straight through, as if there were no interceptor: a run started without tracing (recorded
 * before this module existed, or with tracing off) runs, and replays, exactly the code it ran before. The
 * choice is made from what the history holds (the start's and the signal's headers), so a replay always
 * makes the same one, whatever the worker's settings.
 *
 * The OpenTelemetry code is loaded the first time a run needs it: each workflow evaluates its modules anew
 * (the SDK keeps module state per workflow), and evaluating OpenTelemetry's cost about 7 ms of CPU for every
 * workflow created, traced or not (measured on replays of a finished instance's history: 13.7 ms without,
 * 20.7 ms with a static import). `webpackMode: "eager"` keeps it in the one bundle file.
 */
export const interceptors = (): WorkflowInterceptors => {
  let traced = false;
  /** The start's span context, handed on unchanged by a run whose trace was sampled out. */
  let carried: Payload | undefined;
  let otel: Otel | undefined;
  let loading: Promise<Otel> | undefined;
  const load = () =>
    (loading ??= import(/* webpackMode: "eager" */ '@temporalio/interceptors-opentelemetry/lib/workflow/index.js').then(
      (m) => {
        otel = {
          inbound: new m.OpenTelemetryInboundInterceptor(),
          outbound: new m.OpenTelemetryOutboundInterceptor(),
          internals: new m.OpenTelemetryInternalsInterceptor(),
        };
        return otel;
      },
    ));
  // Outbound calls of a traced run come from its code, which runs once `execute` loaded the interceptors.
  const out = () => (traced ? otel?.outbound : undefined);
  const handOn = <T extends { headers: Record<string, Payload> }>(input: T): T =>
    carried ? { ...input, headers: { ...input.headers, [TRACE_HEADER]: carried } } : input;
  return {
    inbound: [
      {
        execute(input, next) {
          traced = sampledTrace(input.headers);
          if (!traced) carried = input.headers[TRACE_HEADER];
          return traced ? load().then((o) => o.inbound.execute(input, next)) : next(input);
        },
        handleSignal: (input, next) =>
          sampledTrace(input.headers) ? load().then((o) => o.inbound.handleSignal(input, next)) : next(input),
        handleUpdate: (input, next) =>
          sampledTrace(input.headers) ? load().then((o) => o.inbound.handleUpdate(input, next)) : next(input),
        // Synchronous: traced once the interceptors are loaded (a traced start or signal loads them).
        validateUpdate: (input, next) =>
          otel && sampledTrace(input.headers) ? otel.inbound.validateUpdate(input, next) : next(input),
        handleQuery: (input, next) =>
          sampledTrace(input.headers) ? load().then((o) => o.inbound.handleQuery(input, next)) : next(input),
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => out()?.scheduleActivity(input, next) ?? next(handOn(input)),
        scheduleLocalActivity: (input, next) => out()?.scheduleLocalActivity(input, next) ?? next(handOn(input)),
        startChildWorkflowExecution: (input, next) =>
          out()?.startChildWorkflowExecution(input, next) ?? next(handOn(input)),
        startNexusOperation: (input, next) => out()?.startNexusOperation(input, next) ?? next(input),
        continueAsNew: (input, next) => out()?.continueAsNew(input, next) ?? next(handOn(input)),
        signalWorkflow: (input, next) => out()?.signalWorkflow(input, next) ?? next(handOn(input)),
        getLogAttributes: (input, next) => out()?.getLogAttributes(input, next) ?? next(input),
      },
    ],
    internals: [
      {
        // Disables the sandbox's context manager when the run leaves the cache (none was made: nothing).
        dispose(input, next) {
          if (otel) void otel.internals.dispose(input, next);
          else next(input);
        },
      },
    ],
  };
};
