import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { Logger } from '../logger.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.js';

// A CommonJS package: its namespace is the default export under Node's ESM loader.
const { IndexedValueType } = proto.temporal.api.enums.v1;
const INDEXED: Record<string, proto.temporal.api.enums.v1.IndexedValueType> = {
  KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  KEYWORD_LIST: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

/** The command that registers the attributes on a Temporal of one's own (docs/operations.md, docker-compose). */
export const REGISTER_COMMAND = SEARCH_ATTRIBUTES.map(
  (k) =>
    `temporal operator search-attribute create --namespace default --name ${k.name} --type ${k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword'}`,
).join(' && ');

/**
 * Registers the plan search attributes in the namespace, those missing only (at every start, so an
 * upgrade adds new ones). A server that refuses (no operator rights on a shared cluster) leaves plans
 * without them: the service says so once and starts plans without attributes rather than failing them.
 */
export async function ensureSearchAttributes(
  connection: Connection,
  namespace: string,
  logger: Logger,
): Promise<boolean> {
  try {
    const existing = await connection.operatorService.listSearchAttributes({ namespace });
    const known = new Set([
      ...Object.keys(existing.customAttributes ?? {}),
      ...Object.keys(existing.systemAttributes ?? {}),
    ]);
    const missing = SEARCH_ATTRIBUTES.filter((k) => !known.has(k.name));
    if (missing.length === 0) return true;
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((k) => [k.name, INDEXED[k.type]!])),
    });
    logger.info({ attributes: missing.map((k) => k.name) }, 'registered the plan search attributes in Temporal');
    return true;
  } catch (err) {
    // Registered meanwhile by another node: fine.
    if (/already exists/i.test((err as Error).message)) return true;
    logger.warn(
      { err, register: REGISTER_COMMAND },
      'could not register the plan search attributes; plans run without them until they are registered',
    );
    return false;
  }
}
