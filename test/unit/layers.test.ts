import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers of docs/architecture.md, lowest first: a module may import its own layer's modules and
 * those of layers below, never one above. A change that makes an import run back up fails here.
 */
const LAYERS: string[][] = [
  ['src/errors', 'src/ids', 'src/logger', 'src/memory', 'src/shares', 'src/tracing', 'src/vocabulary'],
  ['src/db', 'src/embedded', 'src/lifecycle', 'src/ports'],
  ['src/auth', 'src/audit', 'src/connections'],
  ['src/config', 'src/engine'],
  ['src/alterations'],
  ['activities'],
  ['workflows'],
  ['src/temporal', 'src/metrics'],
  ['src/api', 'src/client'],
  // The console is mounted by the process (src/service/api.ts) and drives the API's commands; the API knows
  // it only as a `Surface` (src/api/context.ts).
  ['src/console'],
  ['src/service', 'src/cli', 'src/build'],
  ['src/main'],
];

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const rank = new Map(LAYERS.flatMap((names, i) => names.map((n) => [n, i] as const)));

/** `src/engine/executor.ts` → `src/engine`; `src/main.ts` → `src/main`; `workflows/x.ts` → `workflows`. */
function unitOf(file: string): string {
  const parts = path.relative(ROOT, file).split(path.sep);
  if (parts[0] !== 'src') return parts[0]!;
  return parts.length > 2 ? `src/${parts[1]}` : `src/${parts[1]!.replace(/\.(tsx?|js)$/, '')}`;
}

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(p);
    else if (/\.tsx?$/.test(entry.name)) yield p;
  }
}

describe('the layers', () => {
  it('are imported only downwards: no import runs back up, and every module has a layer', () => {
    const upward: string[] = [];
    const unplaced = new Set<string>();
    for (const top of ['src', 'workflows', 'activities']) {
      for (const file of sources(path.join(ROOT, top))) {
        const from = unitOf(file);
        for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
          const to = unitOf(path.resolve(path.dirname(file), m[1]!));
          if (from === to) continue;
          for (const u of [from, to]) if (!rank.has(u)) unplaced.add(u);
          if ((rank.get(to) ?? -1) > (rank.get(from) ?? 99))
            upward.push(`${path.relative(ROOT, file)} → ${m[1]} (${from} imports ${to})`);
        }
      }
    }
    expect([...unplaced]).toEqual([]);
    expect(upward).toEqual([]);
  });

  it('form no circle: no module imports, through others, a module that imports it (type-only imports count)', () => {
    const files = ['src', 'workflows', 'activities'].flatMap((top) => [...sources(path.join(ROOT, top))]);
    const known = new Set(files);
    const edges = new Map<string, string[]>();
    for (const file of files) {
      const to: string[] = [];
      for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
        const target = path.resolve(path.dirname(file), m[1]!).replace(/\.js$/, '');
        const found = [`${target}.ts`, `${target}.tsx`].find((t) => known.has(t));
        if (found) to.push(found);
      }
      edges.set(file, to);
    }
    // Depth-first, each circle reported once by its modules in order.
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string) => {
      state.set(file, 'open');
      stack.push(file);
      for (const next of edges.get(file) ?? []) {
        if (state.get(next) === 'open')
          circles.push([...stack.slice(stack.indexOf(next)), next].map((f) => path.relative(ROOT, f)).join(' → '));
        else if (!state.has(next)) visit(next);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(circles).toEqual([]);
  });
});
