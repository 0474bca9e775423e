import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, rmdir, utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { CLAIM_LOCK_DIR, claimDataDir, lockClaim } from '../../src/embedded/leftovers.js';

/**
 * Two services started at the same moment on one new data folder: exactly one may claim it. Each start runs
 * as a process of its own (the claim counts only a live process that looks like the service); once both have
 * loaded, both are told the same moment to claim at. A round counts as a race when they woke within 20 ms of
 * each other (the claim's read and write take a few); three such races are required, every round must answer
 * one `claimed` and one `refused`.
 */
const SCRIPT = fileURLToPath(new URL('../support/claim-race/main.ts', import.meta.url));
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** A start: its lines as they come, how to tell it something, and how to let it end and wait for it. */
function start(dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, dataDir], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  // A start that was refused has exited: ending its input must not throw.
  child.stdin.on('error', () => undefined);
  const exited = new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}: ${err}`))));
  });
  const iterator = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    next: async () => {
      const line = await iterator.next();
      if (line.done) throw new Error(`the start ended without answering: ${err}`);
      return line.value;
    },
    tell: (line: string) => child.stdin.write(`${line}\n`),
    end: () => {
      child.stdin.end();
      return exited;
    },
  };
}

async function round(dataDir: string): Promise<{ answers: string[]; apartMs: number }> {
  const starts = [start(dataDir), start(dataDir)];
  try {
    expect(await Promise.all(starts.map((s) => s.next()))).toEqual(['ready', 'ready']);
    const at = Date.now() + 100;
    for (const s of starts) s.tell(`go ${at}`);
    const said = (await Promise.all(starts.map((s) => s.next()))).map((line) => line.split(' '));
    return {
      answers: said.map(([answer]) => answer!).sort(),
      apartMs: Math.abs(Number(said[0]![1]) - Number(said[1]![1])),
    };
  } finally {
    await Promise.all(starts.map((s) => s.end()));
  }
}

describe('claiming a data folder', () => {
  it('lets one of two starts at the same moment claim a new folder, and refuses the other', async () => {
    let races = 0;
    for (let i = 0; i < 10 && races < 3; i++) {
      const parent = await mkdtemp(path.join(os.tmpdir(), 'wfa-claim-'));
      dirs.push(parent);
      const dataDir = path.join(parent, 'data');
      const { answers, apartMs } = await round(dataDir);
      expect(answers).toEqual(['claimed', 'refused']);
      // The lock is given back: only the service's pid file is left.
      expect(await readdir(dataDir)).toEqual(['service.pid']);
      if (apartMs <= 20) races++;
    }
    expect(races).toBe(3);
  }, 120_000);

  it('takes over the lock a start killed while claiming left behind, once it is 10 s old', async () => {
    const parent = await mkdtemp(path.join(os.tmpdir(), 'wfa-claim-'));
    dirs.push(parent);
    const lock = path.join(parent, CLAIM_LOCK_DIR);
    await mkdir(lock);
    const old = new Date(Date.now() - 11_000);
    await utimes(lock, old, old);
    const t0 = Date.now();
    const claim = await claimDataDir(parent, { postgres: false, devServer: false }, { info: () => undefined });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect((await readdir(parent)).sort()).toEqual(['service.pid']);
    await claim.release();
  });

  it('takes over a stale lock whose right to take over a second kill left behind too', async () => {
    const parent = await mkdtemp(path.join(os.tmpdir(), 'wfa-claim-'));
    dirs.push(parent);
    const old = new Date(Date.now() - 11_000);
    for (const name of [CLAIM_LOCK_DIR, `${CLAIM_LOCK_DIR}.takeover`]) {
      await mkdir(path.join(parent, name));
      await utimes(path.join(parent, name), old, old);
    }
    const t0 = Date.now();
    const claim = await claimDataDir(parent, { postgres: false, devServer: false }, { info: () => undefined });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect((await readdir(parent)).sort()).toEqual(['service.pid']);
    await claim.release();
  });

  it('waits for a fresh lock, and gives back only its own lock, not one that replaced it', async () => {
    const parent = await mkdtemp(path.join(os.tmpdir(), 'wfa-claim-'));
    dirs.push(parent);
    const lock = path.join(parent, CLAIM_LOCK_DIR);
    await mkdir(lock);
    // Held by another start, which gives it back 300 ms later.
    setTimeout(() => void rmdir(lock), 300);
    const t0 = Date.now();
    const unlock = await lockClaim(parent);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    // Taken over meanwhile (this start looked stale, paused): the new holder's lock stays.
    await rmdir(lock);
    await mkdir(lock);
    const later = new Date(Date.now() + 5_000);
    await utimes(lock, later, later);
    await unlock();
    expect(await readdir(parent)).toEqual([CLAIM_LOCK_DIR]);
    // Its own lock it gives back.
    await rmdir(lock);
    const again = await lockClaim(parent);
    await again();
    expect(await readdir(parent)).toEqual([]);
  });
});
