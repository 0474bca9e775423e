import type pg from 'pg';
import type { ConfigCipher } from '../connections/cipher.js';
import { sendThroughConnection } from '../connections/http.js';
import { resolveConnectionInput } from '../connections/resolve.js';
import type { HttpConnectionConfiguration } from '../connections/types.js';
import { type Queryable, withTransaction } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { findActivityType } from './activity-types.js';
import type { DefinitionCache, DefinitionVersion } from './definitions.js';
import { findActivity, nodeIdOf, successors } from './flowchart.js';
import { evaluateInputs, recordedInputs } from './inputs.js';
import { INSTANCE_COLUMNS, instanceFromRow, type InstanceRow, type InstanceState, lockInstance, saveInstance } from './instance-state.js';
import { findResilienceStrategy, retryPolicyOf, type StepRetryPolicy } from './resilience.js';
import { convertValue, isVariableType } from './values.js';

export interface EngineDeps {
  pool: pg.Pool;
  definitions: DefinitionCache;
  logger: Logger;
  /** Decrypts connection configurations when an activity's connection input is resolved. */
  cipher: ConfigCipher;
  clock?: () => Date;
}

export interface StepResult {
  /** true while the instance has scheduled work it can run now. */
  hasMoreWork: boolean;
  /** The activity that ran in this step, if any. */
  executedActivityId?: string;
  /** The retry policy of the next step's activity, when it names a resilience strategy. */
  nextRetry?: StepRetryPolicy;
}

export interface StepOptions {
  /** Temporal's attempt number of this step (1 for the first). */
  attempt?: number;
  /** Record a fault as an incident now, whatever attempts the activity's strategy allows. */
  finalAttempt?: boolean;
}

/**
 * Thrown when an activity with a resilience strategy faults and has attempts left: the step's
 * transaction rolls back (the attempt leaves no trace) and Temporal retries it with the strategy's policy.
 */
export class RetryableActivityFault extends Error {
  override name = 'RetryableActivityFault';
}

/** The retry policy for running the activity at the head of the schedule, if it names a strategy. */
export async function nextRetryPolicy(deps: Pick<EngineDeps, 'definitions'>, db: Queryable, s: InstanceState): Promise<StepRetryPolicy | undefined> {
  const head = s.scheduled[0];
  if (head === undefined || s.status !== 'Running' || s.subStatus === 'Faulted') return undefined;
  const def = await deps.definitions.byVersionId(db, s.definitionVersionId);
  const strategy = def ? findResilienceStrategy(findActivity(def.root, head)?.resilienceStrategyId) : undefined;
  return strategy ? retryPolicyOf(strategy) : undefined;
}

/** What the workflow needs before its first step: the retry policy of the activity to run first. */
export async function peekStep(deps: EngineDeps, instanceId: string): Promise<{ nextRetry?: StepRetryPolicy }> {
  const { rows } = await deps.pool.query<InstanceRow>(`SELECT ${INSTANCE_COLUMNS} FROM workflow_instances WHERE id = $1`, [instanceId]);
  if (!rows[0]) return {};
  const nextRetry = await nextRetryPolicy(deps, deps.pool, instanceFromRow(rows[0]));
  return nextRetry ? { nextRetry } : {};
}

/**
 * Settles the sub-status after a change: executing while work is scheduled, suspended on bookmarks,
 * finished when neither is left. A faulted or finished instance keeps its state.
 */
export function settle(s: InstanceState, now: Date): void {
  if (s.status === 'Finished' || s.subStatus === 'Faulted') return;
  if (s.scheduled.length > 0) {
    s.subStatus = s.subStatus === 'Pending' ? 'Pending' : 'Executing';
  } else if (s.bookmarks.length > 0) {
    s.subStatus = 'Suspended';
  } else {
    s.status = 'Finished';
    s.subStatus = 'Finished';
    s.finishedAt = now;
  }
}

/** Adds the flowchart successors of an activity's outcome to the schedule, once each. */
export function scheduleSuccessors(s: InstanceState, def: DefinitionVersion, activityId: string, outcome: string): void {
  for (const next of successors(def.root, activityId, outcome)) {
    if (!s.scheduled.includes(next)) s.scheduled.push(next);
  }
}

export function recordIncident(s: InstanceState, activityId: string, activityType: string, message: string, now: Date): void {
  s.incidents.push({ activityId, activityType, message, timestamp: now.toISOString() });
  s.subStatus = 'Faulted';
}

/**
 * Executes the next scheduled activity of one instance, in one transaction: lock the row, run the
 * activity, write the activity record, journal and new state, schedule successors. A retried call after
 * a crash finds the committed state and runs the *next* step, so no step's effect is recorded twice.
 */
export async function runStep(deps: EngineDeps, instanceId: string, options: StepOptions = {}): Promise<StepResult> {
  const clock = deps.clock ?? (() => new Date());
  return withTransaction(deps.pool, async (client) => {
    const s = await lockInstance(client, instanceId);
    if (!s || s.status === 'Finished' || s.subStatus === 'Faulted') return { hasMoreWork: false };
    const now = clock();
    s.updatedAt = now;
    const def = await deps.definitions.byVersionId(client, s.definitionVersionId);
    if (!def) throw new Error(`Definition version ${s.definitionVersionId} of instance ${s.id} is missing`);

    const activityId = s.scheduled.shift();
    if (activityId === undefined) {
      settle(s, now);
      await saveInstance(client, s);
      return { hasMoreWork: false };
    }
    if (s.subStatus === 'Pending') s.subStatus = 'Executing';

    const activity = findActivity(def.root, activityId);
    const type = activity ? findActivityType(activity.type) : undefined;
    if (!activity || !type) {
      const message = activity
        ? `Activity type ${activity.type} is not available on this worker`
        : `Activity ${activityId} does not exist in version ${def.version} of ${def.definitionId}`;
      recordIncident(s, activityId, activity?.type ?? 'unknown', message, now);
      await saveInstance(client, s);
      return { hasMoreWork: false, executedActivityId: activityId };
    }

    const inputs = evaluateInputs(type, activity, def, s.variables);
    const connection = await resolveConnectionInput(client, deps.cipher, deps.logger, s.tenantId, type, inputs, {
      instanceId: s.id,
      activityId: activity.id,
    });
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO activity_records (instance_id, tenant_id, activity_id, node_id, activity_type, name, status, inputs, started_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'Running', $7::jsonb, $8) RETURNING id`,
      [s.id, s.tenantId, activity.id, nodeIdOf(def.root, activity), activity.type, activity.name ?? null,
        JSON.stringify(recordedInputs(type, inputs)), now],
    );
    const recordId = rows[0]!.id;
    const finishRecord = (status: 'Completed' | 'Faulted') =>
      client.query('UPDATE activity_records SET status = $2, completed_at = $3 WHERE id = $1', [recordId, status, now]);
    const strategy = findResilienceStrategy(activity.resilienceStrategyId);
    const fault = async (message: string) => {
      if (strategy && !options.finalAttempt && (options.attempt ?? 1) < strategy.maxAttempts) {
        throw new RetryableActivityFault(`${message} (attempt ${options.attempt ?? 1} of ${strategy.maxAttempts} under ${strategy.id})`);
      }
      recordIncident(s, activity.id, activity.type, message, now);
      await finishRecord('Faulted');
    };
    const complete = async (outcome: string) => {
      await finishRecord('Completed');
      scheduleSuccessors(s, def, activity.id, outcome);
    };

    switch (activity.type) {
      case 'Elsa.WriteLine':
        await client.query('INSERT INTO journal_entries (instance_id, activity_id, message, timestamp) VALUES ($1, $2, $3, $4)', [
          s.id, activity.id, inputs.text === null || inputs.text === undefined ? '' : String(inputs.text), now,
        ]);
        await complete('Done');
        break;
      case 'Elsa.SetVariable': {
        const variableId = String(inputs.variable);
        const variable = def.variables.find((v) => v.id === variableId);
        const converted = variable && isVariableType(variable.typeName) ? convertValue(variable.typeName, inputs.value) : undefined;
        if (!variable) await fault(`Variable with ID ${variableId} not found`);
        else if (!converted?.ok) await fault(`Value is not a valid ${variable.typeName} for variable ${variableId}`);
        else {
          s.variables[variableId] = converted.value;
          await complete('Done');
        }
        break;
      }
      case 'Elsa.Http.SendHttpRequest': {
        if (!connection?.configuration) {
          await fault(
            connection?.name
              ? `Connection "${connection.name}" could not be resolved: no ${connection.connectionType} of that name exists in this tenant`
              : 'No connection is selected for Send HTTP Request',
          );
          break;
        }
        // An absent method or path is the input's default (GET, ''); one evaluated to nothing is an error.
        if (typeof inputs.method !== 'string' || inputs.method === '' || typeof inputs.path !== 'string') {
          await fault('Send HTTP Request needs a method and a path (text)');
          break;
        }
        const outcome = await sendThroughConnection(connection.configuration as HttpConnectionConfiguration, {
          method: inputs.method,
          path: inputs.path,
          body: inputs.body,
        });
        if (!outcome.ok) {
          await fault(`HTTP request through connection "${connection.name}" failed: ${outcome.error}`);
          break;
        }
        const resultVariable = typeof inputs.resultVariable === 'string' && inputs.resultVariable ? inputs.resultVariable : undefined;
        if (resultVariable) {
          const variable = def.variables.find((v) => v.id === resultVariable);
          const converted = variable && isVariableType(variable.typeName) ? convertValue(variable.typeName, outcome.status) : undefined;
          if (!variable || !converted?.ok) {
            await fault(`Variable with ID ${resultVariable} cannot hold the status code`);
            break;
          }
          s.variables[resultVariable] = converted.value;
        }
        if (outcome.status < 200 || outcome.status > 299) {
          await fault(`HTTP request through connection "${connection.name}" returned status ${outcome.status}`);
          break;
        }
        await complete('Done');
        break;
      }
      case 'Elsa.Event':
        // The record stays Running until the event is triggered; the bookmark suspends the instance.
        s.bookmarks.push({ activityId: activity.id, eventName: String(inputs.eventName) });
        break;
      case 'Elsa.Fault':
        await fault(inputs.message === null || inputs.message === undefined ? 'Faulted' : String(inputs.message));
        break;
      case 'Elsa.Finish':
        await finishRecord('Completed');
        s.scheduled = [];
        s.bookmarks = [];
        s.status = 'Finished';
        s.subStatus = 'Finished';
        s.finishedAt = now;
        break;
      default:
        await fault(`Activity type ${activity.type} has no executor`);
    }
    settle(s, now);
    await saveInstance(client, s);
    if ((s.subStatus as string) === 'Faulted') deps.logger.warn({ instanceId: s.id, activityId: activity.id }, 'workflow instance faulted');
    const hasMoreWork = s.status === 'Running' && (s.subStatus as string) === 'Executing' && s.scheduled.length > 0;
    const nextRetry = hasMoreWork ? await nextRetryPolicy(deps, client, s) : undefined;
    return { hasMoreWork, executedActivityId: activity.id, ...(nextRetry ? { nextRetry } : {}) };
  });
}
