import { Interrupted } from './failure.js';

/** What the prompt needs of a terminal's input (process.stdin on a TTY). */
export interface TerminalInput {
  setRawMode(raw: boolean): unknown;
  on(event: 'data', listener: (chunk: Buffer | string) => void): unknown;
  off(event: 'data', listener: (chunk: Buffer | string) => void): unknown;
  resume(): unknown;
  pause(): unknown;
}

/**
 * Asks for a secret on a terminal without showing it: the terminal is put in raw mode (no echo) until
 * Enter, and restored whatever happens. Backspace deletes, Ctrl-U clears, Ctrl-C ends the CLI (exit 130)
 * Ctrl-D on an empty line answers nothing (undefined), and the keys that send escape sequences are ignored.
 */
export function readHidden(
  prompt: string,
  input: TerminalInput,
  output: { write(text: string): unknown },
): Promise<string | undefined> {
  // Raw mode before the prompt: what is typed as soon as the prompt shows is never echoed.
  input.setRawMode(true);
  input.resume();
  output.write(prompt);
  let secret = '';
  let escape = false;
  return new Promise<string | undefined>((resolve, reject) => {
    const done = (settle: () => void) => {
      input.off('data', onData);
      input.setRawMode(false);
      input.pause();
      output.write('\n');
      settle();
    };
    const onData = (chunk: Buffer | string) => {
      for (const ch of chunk.toString()) {
        // A key that sends an escape sequence (an arrow, F1) is not part of the secret.
        if (escape) {
          escape = ch === '[' || ch === 'O' || (ch >= '0' && ch <= '9') || ch === ';';
          continue;
        }
        if (ch === '\u001b') escape = true;
        else if (ch === '\r' || ch === '\n') return done(() => resolve(secret));
        else if (ch === '\u0003') return done(() => reject(new Interrupted('Interrupted: not signed in')));
        else if (ch === '\u0004' && secret === '') return done(() => resolve(undefined));
        else if (ch === '\u007f' || ch === '\b') secret = [...secret].slice(0, -1).join('');
        else if (ch === '\u0015') secret = '';
        else if (ch >= ' ') secret += ch;
      }
    };
    input.on('data', onData);
  });
}
