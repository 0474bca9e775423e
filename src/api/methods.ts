import type { RouterRoute } from 'hono/types';

/**
 * For the not-found handler: the methods a path supports, as an `Allow` value, when some route has
 * that path (so the answer is 405, not 404); undefined for an unknown path.
 */
export function methodNotAllowed(routes: readonly RouterRoute[]): (path: string) => string | undefined {
  const byPattern = new Map<string, { pattern: RegExp; methods: Set<string>; static: boolean }>();
  for (const r of routes) {
    if (r.method === 'ALL' || r.path.includes('*')) continue;
    let entry = byPattern.get(r.path);
    if (!entry) {
      const source = r.path
        .split('/')
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      entry = { pattern: new RegExp(`^${source}$`), methods: new Set(), static: !r.path.includes(':') };
      byPattern.set(r.path, entry);
    }
    entry.methods.add(r.method.toUpperCase());
    if (r.method.toUpperCase() === 'GET') entry.methods.add('HEAD');
  }
  // A path that is a route of its own (`/alterations/submit`) is that route only, not also an id in a
  // parameterised one (`/alterations/{planId}`): ids may not be such words.
  return (path) => {
    const matching = [...byPattern.values()].filter((e) => e.pattern.test(path));
    const exact = matching.filter((e) => e.static);
    const methods = new Set<string>();
    for (const e of exact.length ? exact : matching) e.methods.forEach((x) => methods.add(x));
    return methods.size ? [...methods].sort().join(', ') : undefined;
  };
}
