/**
 * Resilience strategies: retry policies an activity may name with `resilienceStrategyId`. Its execution
 * is then retried by Temporal with that policy (the failed attempts leave no trace in the instance)
 * before a fault becomes an incident.
 */
export interface ResilienceStrategy {
  id: string;
  displayName: string;
  maxAttempts: number;
  initialIntervalMs: number;
  backoffCoefficient: number;
  maxIntervalMs: number;
}

export const RESILIENCE_STRATEGIES: readonly ResilienceStrategy[] = [
  {
    id: 'retry-3-quick',
    displayName: 'Retry 3 times, quickly',
    maxAttempts: 3,
    initialIntervalMs: 200,
    backoffCoefficient: 2,
    maxIntervalMs: 1_000,
  },
  {
    id: 'retry-5-exponential',
    displayName: 'Retry 5 times with exponential backoff',
    maxAttempts: 5,
    initialIntervalMs: 1_000,
    backoffCoefficient: 2,
    maxIntervalMs: 30_000,
  },
  {
    id: 'retry-10-patient',
    displayName: 'Retry 10 times over about 10 minutes',
    maxAttempts: 10,
    initialIntervalMs: 5_000,
    backoffCoefficient: 2,
    maxIntervalMs: 120_000,
  },
];

export function findResilienceStrategy(id: string | undefined): ResilienceStrategy | undefined {
  return id === undefined ? undefined : RESILIENCE_STRATEGIES.find((s) => s.id === id);
}

/** The retry policy handed to the workflow for a step (plain data: workflows import no src/ code). */
export interface StepRetryPolicy {
  maximumAttempts: number;
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
}

export function retryPolicyOf(s: ResilienceStrategy): StepRetryPolicy {
  return {
    maximumAttempts: s.maxAttempts,
    initialIntervalMs: s.initialIntervalMs,
    backoffCoefficient: s.backoffCoefficient,
    maximumIntervalMs: s.maxIntervalMs,
  };
}
