import type { Surface } from '../api/context.js';
import { consoleRoutes } from './routes.js';
import { CONSOLE_PATH, consoleIdentity, isConsolePath } from './session.js';

/**
 * The operator's console as the HTTP app mounts it (src/service/api.ts): its pages, forms and streams under
 * `/console`, authenticated by the session cookie and only by it (src/console/session.ts).
 */
export const consoleSurface: Surface = {
  path: CONSOLE_PATH,
  owns: isConsolePath,
  identify: consoleIdentity,
  routes: ({ streams, shutdown }) => consoleRoutes(streams, shutdown),
};
