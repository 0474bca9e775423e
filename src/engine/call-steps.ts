import type pg from 'pg';
import { type HttpOutcome } from '../connections/http.js';
import { isTransientError } from '../db/errors.js';
import { type ConnectionJson, connectionByNameSql, connectionFromJson } from '../connections/repository.js';
import { resolveConnectionInput } from '../connections/resolve.js';
import type { HttpConnectionConfiguration } from '../connections/types.js';
import { prepared, withTransaction } from '../db/pool.js';
import { findActivityType } from './activity-types.js';
import type { DefinitionVersion } from './definitions.js';
import { findActivity } from './flowchart.js';
import { evaluateInputs } from './inputs.js';
import {
  INSTANCE_COLUMNS,
  OUTBOUND_ACTIVITY_TYPE,
  instanceFromRow,
  type InstanceRow,
  type InstanceState,
  lockInstanceAndRecord,
  saveInstance,
} from './instance-state.js';
import { headIsPure, PURE_STEPS_PER_CHUNK, type PureWrites, runPureSteps, writePureSteps } from './pure-steps.js';
import { recordIncident, scheduleSuccessors, settle } from './transitions.js';
import { convertValue, isVariableType } from './values.js';
import { now as nowBy } from '../vocabulary/clock.js';

import {
  ALSO_EXECUTED_NAMED,
  type CallDetails,
  type EngineDeps,
  markOf,
  type PendingCall,
  type PreparedCall,
  type ReadyCall,
  retryUnderStrategy,
  type StepOptions,
  type StepResult,
  stepResult,
  toldIfEnded,
} from './step-result.js';

/**
 * The parts of a step that calls out (Send HTTP Request) other than its first: the call read back to be made
 * apart (`prepareCall`), and its outcome recorded (`finishOutboundCall`, `finishCall`), with the pure steps it
 * schedules.
 */

/** The call a step just started, as `prepareCall` would read it back after the step's commit. */
export function readyCall(c: PendingCall): ReadyCall {
  return {
    kind: 'call',
    tenantKey: c.tenantKey,
    details: {
      instanceId: c.instanceId,
      recordId: c.recordId,
      activityId: c.activityId,
      activityType: c.activityType,
      connectionName: c.connectionName,
      ...(c.resultVariable ? { resultVariable: c.resultVariable } : {}),
    },
    connection: c.configuration as HttpConnectionConfiguration,
    request: { method: c.method, path: c.path, body: c.body, idempotencyKey: `${c.instanceId}:${c.recordId}` },
  };
}

/**
 * Part two of an outbound step made apart (`callsApart`): the started call read back from Postgres, as the
 * first part recorded it (inputs evaluated again from the instance's variables, the connection resolved by
 * name in the tenant), with nothing held: no transaction, no row lock.
 */
export async function prepareCall(
  deps: EngineDeps,
  instanceId: string,
  recordId: string,
  /** The connection the first part resolved (`StepResult.call.connectionName`): read in the same round trip. */
  connectionName?: string,
): Promise<PreparedCall> {
  // The record, its instance and the connection the call named in one round trip (nothing is locked: part three
  // re-checks both under the lock). Inputs are evaluated again below; a connection they no longer name is read apart.
  const hinted = connectionName !== undefined;
  const { rows } = await deps.pool.query<
    InstanceRow & {
      record: { activity_id: string; activity_type: string; status: string } | null;
      connection?: ConnectionJson | null;
    }
  >(
    prepared(
      `SELECT ${INSTANCE_COLUMNS},
              (SELECT json_build_object('activity_id', r.activity_id, 'activity_type', r.activity_type, 'status', r.status)
                 FROM activity_records r WHERE r.id = $2 AND r.instance_id = $1) AS record
              ${hinted ? `, ${connectionByNameSql('workflow_instances.tenant_id', '$3')} AS connection` : ''}
         FROM workflow_instances WHERE id = $1`,
      hinted ? [instanceId, recordId, connectionName] : [instanceId, recordId],
    ),
  );
  const record = rows[0]?.record ?? undefined;
  const details: CallDetails = {
    instanceId,
    recordId,
    activityId: record?.activity_id ?? 'unknown',
    activityType: record?.activity_type ?? OUTBOUND_ACTIVITY_TYPE,
    connectionName: '',
  };
  const s = rows[0] ? instanceFromRow(rows[0]) : undefined;
  if (!s || !record || record.status !== 'Running' || s.status === 'Finished' || s.subStatus === 'Faulted')
    return { kind: 'skip', details };
  const def = await deps.definitions.byVersionId(deps.pool, s.definitionVersionId);
  const activity = def ? findActivity(def.root, record.activity_id) : undefined;
  const type = activity ? findActivityType(activity.type) : undefined;
  if (!def || !activity || !type) return { kind: 'skip', details, why: 'its activity no longer exists' };
  const inputs = evaluateInputs(type, activity, def, s.variables);
  const connection = await resolveConnectionInput(
    deps.pool,
    deps.cipher,
    deps.logger,
    s.tenantKey,
    type,
    inputs,
    { instanceId, activityId: activity.id },
    hinted
      ? { name: connectionName, connection: () => connectionFromJson(rows[0]!.connection ?? null, deps.cipher) }
      : undefined,
  );
  details.connectionName = connection?.name ?? '';
  if (typeof inputs.resultVariable === 'string' && inputs.resultVariable)
    details.resultVariable = inputs.resultVariable;
  if (!connection?.configuration || typeof inputs.method !== 'string' || typeof inputs.path !== 'string')
    return { kind: 'skip', details, why: 'its connection or inputs no longer resolve' };
  return {
    kind: 'call',
    tenantKey: s.tenantKey,
    details,
    connection: connection.configuration as HttpConnectionConfiguration,
    request: {
      method: inputs.method,
      path: inputs.path,
      body: inputs.body,
      idempotencyKey: `${instanceId}:${recordId}`,
    },
  };
}

/**
 * Part three of an outbound step made apart: the outcome recorded as `runStep` would (the instance locked
 * and re-checked). A strategy's retries were the workflow's, so a fault here is final.
 */
export async function finishOutboundCall(
  deps: EngineDeps,
  details: CallDetails,
  outcome: HttpOutcome,
  /** `claim`: the delivery's claim on the call, given back with the outcome (`lockInstanceAndRecord`). */
  options: Pick<StepOptions, 'ownWorkflow'> & { claim?: string } = {},
): Promise<StepResult> {
  return withTransaction(
    deps.pool,
    (client) => finishCall(deps, client, details, outcome, { ...options, finalAttempt: true }),
    markOf(options),
  );
}

/**
 * Part three of an outbound step: the instance is locked again and re-checked. When it changed meanwhile
 * so that this call no longer belongs to its execution (finished, cancelled, faulted, or the record was
 * closed by an alteration), only the activity record notes the outcome; otherwise the outcome is applied
 * as the one-transaction step would have.
 */
export async function finishCall(
  deps: EngineDeps,
  client: pg.PoolClient,
  call: CallDetails,
  outcome: HttpOutcome,
  options: StepOptions & { claim?: string },
): Promise<StepResult> {
  const now = nowBy(deps.clock);
  const { s, recordStatus } = await lockInstanceAndRecord(client, call.instanceId, call.recordId, options.claim);
  const finishRecord = (status: 'Completed' | 'Faulted') =>
    client.query(
      prepared(`UPDATE activity_records SET status = $2, completed_at = $3 WHERE id = $1 AND status = 'Running'`, [
        call.recordId,
        status,
        now,
      ]),
    );
  const succeeded = outcome.ok && outcome.status >= 200 && outcome.status <= 299;
  if (!s || recordStatus !== 'Running' || s.status === 'Finished' || s.subStatus === 'Faulted') {
    if (recordStatus === 'Running') await finishRecord(succeeded ? 'Completed' : 'Faulted');
    deps.logger.info(
      { instanceId: call.instanceId, activityId: call.activityId },
      'outbound call finished after its instance moved on; outcome recorded on the activity record only',
    );
    // Where the instance stands now: a retried last part whose first attempt committed finds the record
    // closed and the instance moved on, with the work its outcome scheduled still to run.
    return s
      ? { ...(await stepResult(deps, client, s, call.activityId)), ...(await toldIfEnded(deps, client, s, options)) }
      : { hasMoreWork: false, executedActivityId: call.activityId };
  }
  s.updatedAt = now;
  // This call's outcome is recorded below (a retry keeps it out): the others still out keep the instance running.
  const othersOut = s.callsInFlight?.filter((id) => id !== call.activityId);
  const def = await deps.definitions.byVersionId(client, s.definitionVersionId);
  if (!def) throw new Error(`Definition version ${s.definitionVersionId} of instance ${s.id} is missing`);
  const strategyId = findActivity(def.root, call.activityId)?.resilienceStrategyId;
  const fault = async (message: string) => {
    // With attempts left, the record stays Running: the retry calls again with the same Idempotency-Key.
    retryUnderStrategy(strategyId, options, message);
    recordIncident(s, call.activityId, call.activityType, message, now);
    await finishRecord('Faulted');
  };
  if (!outcome.ok) {
    await fault(`HTTP request through connection "${call.connectionName}" failed: ${outcome.error}`);
  } else {
    let stored = true;
    if (call.resultVariable) {
      const variable = def.variables.find((v) => v.id === call.resultVariable);
      const converted =
        variable && isVariableType(variable.typeName) ? convertValue(variable.typeName, outcome.status) : undefined;
      if (!variable || !converted?.ok) {
        stored = false;
        await fault(`Variable with ID ${call.resultVariable} cannot hold the status code`);
      } else {
        s.variables[call.resultVariable] = converted.value;
      }
    }
    if (stored && !succeeded)
      await fault(`HTTP request through connection "${call.connectionName}" returned status ${outcome.status}`);
    else if (stored) {
      await finishRecord('Completed');
      scheduleSuccessors(s, def, call.activityId, 'Done');
    }
  }
  s.callsInFlight = othersOut;
  settle(s, now);
  const after = othersOut?.length ? undefined : await pureStepsAfterCall(deps, client, s, def, now, call.activityId);
  const state = after?.state ?? s;
  await saveInstance(client, state);
  if ((state.subStatus as string) === 'Faulted')
    deps.logger.warn({ instanceId: s.id, activityId: call.activityId }, 'workflow instance faulted');
  if (!after) return stepResult(deps, client, s, call.activityId);
  const ran = [call.activityId, ...after.ran];
  const last = ran[ran.length - 1]!;
  return {
    ...(await stepResult(deps, client, state, last)),
    alsoExecuted: { count: ran.length - 1, last: ran.slice(-ALSO_EXECUTED_NAMED - 1, -1) },
  };
}

/**
 * The pure steps the call's outcome scheduled (one chunk, PURE_STEPS_PER_CHUNK), run in the last part's own
 * transaction as `continuePureSteps` would run them in transactions of their own: one step activity and one
 * transaction fewer for a call followed by pure steps. They run on a copy of the state: one failing with an error
 * no retry fixes leaves them to the next step, which faults the instance naming that step, and the call's
 * outcome stays recorded.
 */
async function pureStepsAfterCall(
  deps: EngineDeps,
  client: pg.PoolClient,
  s: InstanceState,
  def: DefinitionVersion,
  now: Date,
  activityId: string,
): Promise<{ state: InstanceState; ran: string[] } | undefined> {
  if (!headIsPure(s, def)) return undefined;
  const state = structuredClone(s);
  let writes: PureWrites;
  try {
    // In memory (the definitions aside): nothing is written until every step of the chunk has run.
    writes = await runPureSteps(client, deps.definitions, [state], now, undefined, undefined, PURE_STEPS_PER_CHUNK);
  } catch (err) {
    if (isTransientError(err)) throw err;
    deps.logger.warn(
      { err, instanceId: s.id, activityId },
      'the steps after an outbound call could not run with its outcome; they run as the next step',
    );
    return undefined;
  }
  if (writes.records.length === 0) return undefined;
  await writePureSteps(client, writes);
  return { state, ran: writes.records.map((r) => r.activity_id) };
}
