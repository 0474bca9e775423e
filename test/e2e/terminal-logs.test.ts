import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { freePort } from '../support/free-port.js';
import { exitWithin, spawnKept } from '../support/processes.js';

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
  const proc = tty
    ? spawnKept('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env, stdin: 'pipe' })
    : spawnKept('sh', ['-c', `exec ${command}`], { cwd: ROOT, env });
  const deadline = Date.now() + 90_000;
  while (!proc.out().includes('Ctrl-C stops everything') && Date.now() < deadline && !proc.done())
    await new Promise((r) => setTimeout(r, 100));
  const started = proc.out().includes('Ctrl-C stops everything');
  proc.child.kill('SIGTERM');
  const exit = await exitWithin(proc, 60_000);
  if (exit === 'hung') proc.child.kill('SIGKILL');
  if (!started || exit === 'hung')
    throw new Error(
      `the service (${tty ? 'terminal' : 'pipe'}) ${started ? 'did not stop' : 'did not start'}\n${proc.tail()}`,
    );
  await rm(work, { recursive: true, force: true });
  return proc.out();
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
  }, 300_000);
});
