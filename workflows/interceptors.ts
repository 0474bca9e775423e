import type { Payload } from '@temporalio/common';
import type {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type { WorkflowInterceptors } from '@temporalio/workflow';

/** The header the OpenTelemetry client and workflow interceptors carry the span context in. */
const TRACE_HEADER = '_tracer-data';

const carriesTrace = (headers: Record<string, Payload>) => TRACE_HEADER in headers;

interface Otel {
  inbound: OpenTelemetryInboundInterceptor;
  outbound: OpenTelemetryOutboundInterceptor;
  internals: OpenTelemetryInternalsInterceptor;
}

/**
 * The workflow interceptors every bundle of this service includes (`workflowInterceptorModules`, see
 * src/temporal/bundle.ts): the Temporal SDK's OpenTelemetry interceptors, for the runs that carry a trace.
 *
 * A run is traced when its start carried a span context (a client of the service with tracing on started
 * it, or a traced run continued as new into it): then its run, its activities and its continue-as-new are
 * spans of that trace, exported through the `exporter` sink. A signal, an update or a query is traced when
 * it carries a span context itself. Everything else passes straight through, as if there were no
 * interceptor: a run started without tracing (recorded before this module existed, or with tracing off)
 * runs, and replays, exactly the code it ran before. The choice is made from what the history holds (the
 * start's and the signal's headers), so a replay always makes the same one, whatever the worker's settings.
 *
 * The OpenTelemetry code is loaded the first time a run needs it: each workflow evaluates its modules anew
 * (the SDK keeps module state per workflow), and evaluating OpenTelemetry's cost about 7 ms of CPU for every
 * workflow created, traced or not (measured on replays of a finished instance's history: 13.7 ms without,
 * 20.7 ms with a static import). `webpackMode: "eager"` keeps it in the one bundle file.
 */
export const interceptors = (): WorkflowInterceptors => {
  let traced = false;
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
  return {
    inbound: [
      {
        execute(input, next) {
          traced = carriesTrace(input.headers);
          return traced ? load().then((o) => o.inbound.execute(input, next)) : next(input);
        },
        handleSignal: (input, next) =>
          carriesTrace(input.headers) ? load().then((o) => o.inbound.handleSignal(input, next)) : next(input),
        handleUpdate: (input, next) =>
          carriesTrace(input.headers) ? load().then((o) => o.inbound.handleUpdate(input, next)) : next(input),
        // Synchronous: traced once the interceptors are loaded (a traced start or signal loads them).
        validateUpdate: (input, next) =>
          otel && carriesTrace(input.headers) ? otel.inbound.validateUpdate(input, next) : next(input),
        handleQuery: (input, next) =>
          carriesTrace(input.headers) ? load().then((o) => o.inbound.handleQuery(input, next)) : next(input),
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => out()?.scheduleActivity(input, next) ?? next(input),
        scheduleLocalActivity: (input, next) => out()?.scheduleLocalActivity(input, next) ?? next(input),
        startChildWorkflowExecution: (input, next) => out()?.startChildWorkflowExecution(input, next) ?? next(input),
        startNexusOperation: (input, next) => out()?.startNexusOperation(input, next) ?? next(input),
        continueAsNew: (input, next) => out()?.continueAsNew(input, next) ?? next(input),
        signalWorkflow: (input, next) => out()?.signalWorkflow(input, next) ?? next(input),
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
