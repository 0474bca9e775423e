import type { Queryable } from '../db/pool.js';
import type { ActivityType } from '../vocabulary/descriptors.js';
import type { Logger } from '../logger.js';
import type { ConfigCipher } from './cipher.js';
import { type Connection, findConnectionByName } from './repository.js';
import { findConnectionType } from './types.js';

/** What the first connection input of an activity resolved to. */
export interface ConnectionInput {
  inputName: string;
  connectionType: string;
  /** The name the input selects, or null when it selects none. */
  name: string | null;
  /** The configuration parsed with the type's schema; absent when unresolved. */
  configuration?: Record<string, unknown>;
}

/** The connection name a persisted input value selects: `{"connectionName": "..."}`. */
export function selectedConnectionName(value: unknown): string | null {
  if (value === null || typeof value !== 'object') return null;
  const name = (value as { connectionName?: unknown }).connectionName;
  return typeof name === 'string' && name.trim() !== '' ? name : null;
}

/** The connection an activity's first connection input selects (what `resolveConnectionInput` resolves), if any. */
export function selectedConnectionOf(type: ActivityType, inputs: Record<string, unknown>): string | undefined {
  const input = type.inputs.find((i) => i.connectionType !== undefined);
  return input ? (selectedConnectionName(inputs[input.name]) ?? undefined) : undefined;
}

/**
 * Resolves the first connection input of an activity (several are not supported: the first wins): loads
 * the connection by name in the instance's tenant (its own before a tenant-agnostic one), parses it with
 * the type's schema and returns it for injection. A missing name, no match, or a configuration the type
 * no longer accepts is logged as a warning and the activity runs unresolved; it decides what to do.
 */
export async function resolveConnectionInput(
  db: Queryable,
  cipher: ConfigCipher,
  logger: Logger,
  tenantKey: string,
  type: ActivityType,
  inputs: Record<string, unknown>,
  context: { instanceId: string; activityId: string },
  /**
   * The connection of this name, read already (in the caller's statement): not read again when the input selects
   * it. `connection` decrypts it, so a name the input no longer selects costs nothing.
   */
  known?: { name: string; connection: () => Connection | undefined },
): Promise<ConnectionInput | undefined> {
  const input = type.inputs.find((i) => i.connectionType !== undefined);
  if (!input?.connectionType) return undefined;
  const base = { inputName: input.name, connectionType: input.connectionType };
  const name = selectedConnectionName(inputs[input.name]);
  if (name === null) {
    logger.warn(
      { ...context, input: input.name },
      'no connection selected; the activity runs with an unresolved connection',
    );
    return { ...base, name: null };
  }
  const found =
    known !== undefined && known.name === name
      ? known.connection()
      : await findConnectionByName(db, cipher, tenantKey, name);
  if (!found || found.connectionType !== input.connectionType) {
    logger.warn(
      { ...context, input: input.name, connectionName: name, connectionType: input.connectionType },
      'connection not found; the activity runs with an unresolved connection',
    );
    return { ...base, name };
  }
  const parsed = findConnectionType(input.connectionType)?.schema.safeParse(found.connectionConfiguration);
  if (!parsed?.success) {
    logger.warn(
      { ...context, connectionName: name },
      'connection configuration does not match its type; the activity runs unresolved',
    );
    return { ...base, name };
  }
  return { ...base, name, configuration: parsed.data as Record<string, unknown> };
}
