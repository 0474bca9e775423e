import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Two services started at the same moment on one new data folder: exactly one may claim it. Each start runs
 * as a process of its own (the claim counts only a live process that looks like the service), both wake at
 * the same millisecond, several folders in a row.
 */
const SCRIPT = fileURLToPath(new URL('../support/claim-race/main.ts', import.meta.url));
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const start = (dataDir: string, at: number) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, dataDir, String(at)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`exit ${code}: ${err}`))));
  });

describe('claiming a data folder', () => {
  it('lets one of two starts at the same moment claim a new folder, and refuses the other', async () => {
    for (let i = 0; i < 3; i++) {
      const parent = await mkdtemp(path.join(os.tmpdir(), 'wfa-claim-'));
      dirs.push(parent);
      const dataDir = path.join(parent, 'data');
      // Far enough ahead for both processes to have loaded.
      const at = Date.now() + 2_500;
      const answers = await Promise.all([start(dataDir, at), start(dataDir, at)]);
      expect(answers.sort()).toEqual(['claimed', 'refused']);
      // The lock is given back: only the service's pid file is left.
      expect(await readdir(dataDir)).toEqual(['service.pid']);
    }
  }, 60_000);
});
