import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const WFA = path.join(fileURLToPath(new URL('../..', import.meta.url)), 'src', 'cli', 'wfa.js');

/**
 * The `wfa` CLI as a user runs it: a separate process in `cwd`, with only PATH, HOME (= `cwd`), the config
 * folder under it and `env`; its output, exit code and how long it took.
 */
export function runWfa(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
  stdin = '',
): Promise<{ code: number | null; out: string; err: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WFA, ...args], {
      cwd,
      env: { PATH: process.env.PATH, HOME: cwd, XDG_CONFIG_HOME: path.join(cwd, 'config'), ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, out, err, ms: performance.now() - started }));
    child.stdin.end(stdin);
  });
}
