import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.js';
import { freePort } from '../support/free-port.js';

const isRoot = process.getuid?.() === 0;
const made: string[] = [];
afterAll(async () => {
  for (const dir of made) await rm(dir, { recursive: true, force: true });
});

describe('the embedded Postgres folders', () => {
  // A Postgres data folder placed directly in a shared folder (as the bench once did in /tmp) made that
  // folder 0711 as root: /tmp lost its sticky, world-writable mode and nobody else could write there.
  it.runIf(isRoot)(
    'as root, leaves the mode of a shared parent folder (1777, like /tmp) as it was',
    async () => {
      const shared = await mkdtemp(path.join(os.tmpdir(), 'wfa-shared-'));
      made.push(shared);
      await chmod(shared, 0o1777);
      const pg = await startEmbeddedPostgres({
        dataDir: path.join(shared, 'postgres'),
        port: await freePort(),
        database: 'postgres',
        persistent: false,
      });
      try {
        expect(((await stat(shared)).mode & 0o7777).toString(8)).toBe('1777');
      } finally {
        await pg.stop();
      }
      expect(((await stat(shared)).mode & 0o7777).toString(8)).toBe('1777');
    },
    120_000,
  );
});
