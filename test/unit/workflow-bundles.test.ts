import { readdirSync, readFileSync } from 'node:fs';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { slimWorkflowBundle } from '../../src/temporal/bundle.js';

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

  it('are kept slim: one-byte text with the same values, and a source map without the sources', () => {
    const map = {
      version: 3,
      file: 'bundle.js',
      sources: ['workflows/a.ts'],
      sourcesContent: ['export const note = "jobs a–b …";'],
      names: [],
      mappings: 'AAAA',
    };
    const code =
      '// “quoted” comment — with a dash\nglobalThis.note = "jobs a–b … ø";\n' +
      `//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
    const slim = slimWorkflowBundle(code);
    expect(slim).toMatch(/^[\x20-\x7e\n]*$/);
    const context: { note?: string } = {};
    vm.runInNewContext(slim, context);
    expect(context.note).toBe('jobs a–b … ø');
    const encoded = slim.slice(slim.lastIndexOf('base64,') + 'base64,'.length).trim();
    const { sourcesContent, ...rest } = map;
    expect(sourcesContent).toHaveLength(1);
    expect(JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'))).toEqual(rest);
  });
});
