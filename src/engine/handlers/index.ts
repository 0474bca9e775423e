import { event } from './event.js';
import { fault } from './fault.js';
import { finish } from './finish.js';
import type { ActivityHandler } from './handler.js';
import { sendHttpRequest } from './send-http-request.js';
import { setVariable } from './set-variable.js';
import { writeLine } from './write-line.js';

export type { ActivityHandler, CallRequest, StepContext } from './handler.js';

/** The activity types this worker executes: adding one is its handler file and one line here. */
const HANDLERS: readonly ActivityHandler[] = [writeLine, setVariable, sendHttpRequest, event, fault, finish];

const byType = new Map(HANDLERS.map((h) => [h.typeName, h]));

export function findHandler(typeName: string): ActivityHandler | undefined {
  return byType.get(typeName);
}

export const HANDLED_TYPES: readonly string[] = HANDLERS.map((h) => h.typeName);
