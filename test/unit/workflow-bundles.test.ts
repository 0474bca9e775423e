import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// A worker given a pre-built bundle ignores `interceptors.workflowModules`, so each place that bundles the
// workflows (the build, `npm start` from source, the tests, the bench) must add the tracing interceptors
// itself; one that forgets makes a worker whose traces stop at the workflow. None may drift.
const root = new URL('../../', import.meta.url);

describe('the workflow bundles', () => {
  it('each include the tracing interceptors', () => {
    const calls: { file: string; call: string }[] = [];
    for (const dir of ['src', 'test', 'bench']) {
      for (const file of readdirSync(new URL(dir, root), { recursive: true, encoding: 'utf8' })) {
        if (!file.endsWith('.ts')) continue;
        const text = readFileSync(new URL(`${dir}/${file}`, root), 'utf8');
        for (const m of text.matchAll(/bundleWorkflowCode\(\{/g)) {
          // The options object: up to its closing brace at the call's indentation.
          const call = text.slice(m.index, text.indexOf('})', m.index) + 2);
          calls.push({ file: `${dir}/${file}`, call });
        }
      }
    }
    expect(calls.map((c) => c.file).sort()).toEqual(
      expect.arrayContaining([
        'bench/run.ts',
        'src/build.ts',
        'src/temporal/bundle.ts',
        'test/support/global-setup.ts',
      ]),
    );
    for (const { file, call } of calls) expect(call, file).toMatch(/workflowInterceptorModules: \[[^\]]*interceptors/i);
  });
});
