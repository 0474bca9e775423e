import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const WFA = path.join(fileURLToPath(new URL('../..', import.meta.url)), 'src', 'cli', 'wfa.js');

export interface WfaResult {
  code: number | null;
  out: string;
  err: string;
  ms: number;
}

/** A `wfa` process under way: its output so far, a wait for some text in it, and its end. */
export interface WfaProcess {
  child: ChildProcessWithoutNullStreams;
  /** Resolves once standard output (on a terminal: everything it shows) contains `text`. */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  done: Promise<WfaResult>;
}

/**
 * Starts the `wfa` CLI as a user runs it: a separate process in `cwd`, with only PATH, HOME (= `cwd`), the
 * config folder under it and `env`. With `tty`, it runs on a terminal of its own (util-linux `script`):
 * its standard input, output and error are that terminal, so `out` holds all it shows and what is written
 * to `child.stdin` is typed on it (`\r` for Enter, `\u0003` for Ctrl-C).
 */
export function startWfa(
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
  options: { tty?: boolean } = {},
): WfaProcess {
  const started = performance.now();
  const fullEnv = { PATH: process.env.PATH, HOME: cwd, XDG_CONFIG_HOME: path.join(cwd, 'config'), ...env };
  const command = [process.execPath, WFA, ...args];
  const child = options.tty
    ? spawn('script', ['-qefc', command.map(shellWord).join(' '), '/dev/null'], { cwd, env: fullEnv })
    : spawn(command[0]!, command.slice(1), { cwd, env: fullEnv });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8');
    for (const w of waiters) w();
  });
  child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
  // On a terminal, standard input stays open until the end (its end would be a Ctrl-D typed on it).
  child.on('exit', () => child.stdin.end());
  const done = new Promise<WfaResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      for (const w of waiters) w();
      resolve({ code, out, err, ms: performance.now() - started });
    });
  });
  const waitFor = (text: string | RegExp, timeoutMs = 30_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (typeof text === 'string' ? out.includes(text) : text.test(out)) finish(resolve);
        else if (child.exitCode !== null || child.signalCode !== null)
          finish(() => reject(new Error(`wfa ended before printing ${text}: ${out}${err}`)));
      };
      const timer = setTimeout(
        () => finish(() => reject(new Error(`no ${text} within ${timeoutMs} ms: ${out}`))),
        timeoutMs,
      );
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        waiters.delete(check);
        settle();
      };
      waiters.add(check);
      check();
    });
  return { child, waitFor, done };
}

/** The `wfa` CLI run to its end with `stdin` as its standard input (a pipe): its output, exit code and time. */
export function runWfa(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}, stdin = ''): Promise<WfaResult> {
  const wfa = startWfa(args, cwd, env);
  wfa.child.stdin.end(stdin);
  return wfa.done;
}

const shellWord = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);
