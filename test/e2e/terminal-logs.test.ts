import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { freePort } from '../support/free-port.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The service's output in a terminal (a pseudo-terminal from util-linux `script`) and in a pipe. */
async function output(tty: boolean): Promise<string> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'wfa-tty-'));
  const database = `wfa_tty_${path
    .basename(work)
    .slice(8)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '')}${tty ? 't' : 'p'}`;
  await ensureDatabase(inject('pgAdminUrl'), database);
  const dbUrl = new URL(inject('pgAdminUrl'));
  dbUrl.pathname = `/${database}`;
  const env = {
    ...process.env,
    DATABASE_URL: dbUrl.toString(),
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_TASK_QUEUE: `tty-${database}`,
    DATA_DIR: path.join(work, 'data'),
    PORT: String(await freePort()),
    ADMIN_API_KEY: 'wfa_tty_test_key',
    AUTH_SIGNING_KEY: 'tty',
    LOG_LEVEL: 'info',
  };
  const command = 'node --import tsx src/main.ts';
  const child = tty
    ? spawn('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn('sh', ['-c', `exec ${command}`], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const deadline = Date.now() + 60_000;
  while (!out.includes('Ctrl-C stops everything') && Date.now() < deadline && child.exitCode === null)
    await new Promise((r) => setTimeout(r, 100));
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  await rm(work, { recursive: true, force: true });
  return out;
}

describe('logs', () => {
  it('are readable lines on a terminal and JSON lines in a pipe', async () => {
    const terminal = await output(true);
    expect(terminal).toContain('Ctrl-C stops everything');
    expect(terminal).toMatch(/\[\d\d:\d\d:\d\d\.\d{3}\] .*INFO.*: .*applied migration/);
    expect(terminal).not.toContain('{"level":');
    const piped = await output(false);
    expect(piped).toContain('Ctrl-C stops everything');
    expect(piped).toMatch(/^\{"level":30,.*"msg":"applied migration"\}$/m);
  }, 150_000);
});
