import { proxySinks, type Sinks, type WorkflowInterceptors } from '@temporalio/workflow';

/**
 * A workflow interceptor module for replay tests (bundled beside the service's own interceptors): every
 * activity, local activity, timer and continue-as-new the workflow code asks for, with its arguments,
 * reported through the `commands` sink, also while replaying. A replay alone checks only the kind and
 * order of the commands; with this a test compares what they carry (the job range of each batch, its
 * `notBefore`, the timer's duration, the progress carried to the next run) with what the history recorded.
 */
export type RecordedCommand =
  | { kind: 'activity'; type: string; args: unknown[]; summary?: string; fairnessWeight?: number }
  | { kind: 'localActivity'; type: string; args: unknown[] }
  | { kind: 'timer'; ms: number }
  | { kind: 'continueAsNew'; args: unknown[] };

export interface CommandSinks extends Sinks {
  commands: { record(command: RecordedCommand): void };
}

const { commands } = proxySinks<CommandSinks>();

export const interceptors = (): WorkflowInterceptors => ({
  outbound: [
    {
      scheduleActivity(input, next) {
        commands.record({
          kind: 'activity',
          type: input.activityType,
          args: input.args,
          ...(input.options.summary === undefined ? {} : { summary: input.options.summary }),
          ...(input.options.priority?.fairnessWeight === undefined
            ? {}
            : { fairnessWeight: input.options.priority.fairnessWeight }),
        });
        return next(input);
      },
      scheduleLocalActivity(input, next) {
        commands.record({ kind: 'localActivity', type: input.activityType, args: input.args });
        return next(input);
      },
      startTimer(input, next) {
        commands.record({ kind: 'timer', ms: input.durationMs });
        return next(input);
      },
      continueAsNew(input, next) {
        commands.record({ kind: 'continueAsNew', args: input.args });
        return next(input);
      },
    },
  ],
});
