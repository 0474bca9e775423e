import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `npm run lint` (.ci/lint-tracked) lints what the repository tracks, not a user's scratch files: the README's
 * walkthrough writes JSON files, and a user may leave a draft .ts file in the clone. Checked on a small git
 * checkout of its own (the real script and configs, this clone's node_modules), so it takes seconds rather
 * than a lint of the whole repository, and touches nothing in the clone.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);
let work: string;

/** Badly formatted (Prettier) and wrong (ESLint: unused variable, `any`, a floating promise). */
const SCRATCH_TS = 'const   unused:any = 1\nPromise.resolve( 1 )\n';
const SCRATCH_JSON = '{"alterations":[ {"type":"Cancel"}],\n"filter":{ }}\n';

async function lint(): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('bash', ['.ci/lint-tracked'], { cwd: work, timeout: 180_000 });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-lint-'));
  await mkdir(path.join(work, '.ci'));
  await mkdir(path.join(work, 'src'));
  for (const file of ['.ci/lint-tracked', 'eslint.config.js', '.prettierrc.json', '.prettierignore', 'tsconfig.json'])
    await copyFile(path.join(ROOT, file), path.join(work, file));
  const pkg = { name: 'lint-check', private: true, type: 'module' };
  await writeFile(path.join(work, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  await writeFile(path.join(work, 'src/tracked.ts'), 'export const tracked = 1;\n');
  await symlink(path.join(ROOT, 'node_modules'), path.join(work, 'node_modules'));
  const tracked = ['.ci/lint-tracked', 'eslint.config.js', '.prettierrc.json', '.prettierignore'];
  await run('git', ['init', '-q'], { cwd: work });
  await run('git', ['add', ...tracked, 'tsconfig.json', 'package.json', 'src/tracked.ts'], { cwd: work });
  // Untracked, as a user's scratch files are: in the root (the walkthrough's JSON) and among the sources.
  await writeFile(path.join(work, 'src/scratch.ts'), SCRATCH_TS);
  await writeFile(path.join(work, 'approve-suspended.json'), SCRATCH_JSON);
}, 30_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('npm run lint', () => {
  it('passes with badly formatted, failing files in the clone that git does not track', async () => {
    const result = await lint();
    expect(result.output).not.toContain('scratch.ts');
    expect(result.output).not.toContain('approve-suspended.json');
    expect(result.code, result.output).toBe(0);
  }, 180_000);

  it('fails on the same file once git tracks it, naming it', async () => {
    await run('git', ['add', 'src/scratch.ts'], { cwd: work });
    const result = await lint();
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('src/scratch.ts');
  }, 180_000);
});
