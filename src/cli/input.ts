import { readFile } from 'node:fs/promises';
import { CliFailure } from './failure.js';

/** The JSON of FILE (`-`: standard input); a file that is missing or not JSON is a usage failure (exit 2). */
export async function readJson<T = unknown>(file: string): Promise<T> {
  let text: string;
  try {
    text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  } catch (err) {
    throw new CliFailure(
      `Cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`,
      2,
      'bad-file',
    );
  }
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new CliFailure(`${file} is not JSON: ${(err as Error).message}`, 2, 'bad-file');
  }
}

/** The first line of standard input when it is not a terminal (a piped password), else undefined. */
export async function readStdinLine(): Promise<string | undefined> {
  if (process.stdin.isTTY) return undefined;
  return (await readStdin()).split(/\r?\n/)[0] || undefined;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
