import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type { Payload } from '@temporalio/common';
import type { WorkflowInterceptors } from '@temporalio/workflow';

/** The header the OpenTelemetry client and workflow interceptors carry the span context in. */
const TRACE_HEADER = '_tracer-data';

const carriesTrace = (headers: Record<string, Payload>) => TRACE_HEADER in headers;

/**
 * The workflow interceptors every bundle of this service includes (`workflowInterceptorModules`, see
 * src/temporal/bundle.ts): the Temporal SDK's OpenTelemetry interceptors, for the runs that carry a trace.
 *
 * A run is traced when its start carried a span context (a client of the service with tracing on started
 * it, or a traced run continued as new into it): then its run, its activities and its continue-as-new are
 * spans of that trace, exported through the `exporter` sink. A signal, an update or a query is traced when
 * it carries a span context itself. Everything else passes straight through, as if there were no
 * interceptor: a run started without tracing (recorded before this module existed, or with tracing off)
 * runs, and replays, exactly the code it ran before, and costs nothing extra. The choice is made from what
 * the history holds (the start's and the signal's headers), so a replay always makes the same one.
 */
export const interceptors = (): WorkflowInterceptors => {
  let traced = false;
  // Made on first use only: an untraced run never builds the sandbox's tracer.
  let inbound: OpenTelemetryInboundInterceptor | undefined;
  let outbound: OpenTelemetryOutboundInterceptor | undefined;
  const otelIn = () => (inbound ??= new OpenTelemetryInboundInterceptor());
  const otelOut = () => (outbound ??= new OpenTelemetryOutboundInterceptor());
  return {
    inbound: [
      {
        execute(input, next) {
          traced = carriesTrace(input.headers);
          return traced ? otelIn().execute(input, next) : next(input);
        },
        handleSignal: (input, next) => (carriesTrace(input.headers) ? otelIn().handleSignal(input, next) : next(input)),
        handleUpdate: (input, next) => (carriesTrace(input.headers) ? otelIn().handleUpdate(input, next) : next(input)),
        validateUpdate: (input, next) =>
          carriesTrace(input.headers) ? otelIn().validateUpdate(input, next) : next(input),
        handleQuery: (input, next) => (carriesTrace(input.headers) ? otelIn().handleQuery(input, next) : next(input)),
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => (traced ? otelOut().scheduleActivity(input, next) : next(input)),
        scheduleLocalActivity: (input, next) => (traced ? otelOut().scheduleLocalActivity(input, next) : next(input)),
        startChildWorkflowExecution: (input, next) =>
          traced ? otelOut().startChildWorkflowExecution(input, next) : next(input),
        startNexusOperation: (input, next) => (traced ? otelOut().startNexusOperation(input, next) : next(input)),
        continueAsNew: (input, next) => (traced ? otelOut().continueAsNew(input, next) : next(input)),
        signalWorkflow: (input, next) => (traced ? otelOut().signalWorkflow(input, next) : next(input)),
        getLogAttributes: (input, next) => (traced ? otelOut().getLogAttributes(input, next) : next(input)),
      },
    ],
    // Disables the sandbox's context manager when the run leaves the cache (nothing when none was made).
    internals: [new OpenTelemetryInternalsInterceptor()],
  };
};
