import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureDatabase } from '../../src/embedded/postgres.js';
import { cachedCliPath, CliUnavailableError, ensureCliBinary, parseGoVersion } from '../../src/temporal/cli-binary.js';
import { sink } from '../support/sink.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let work: string;

/** A stand-in for `go`: reports a version and, for `install`, writes a `temporal` into GOBIN after a pause. */
async function fakeGo(version: string, opts: { fail?: boolean } = {}): Promise<string> {
  const dir = await mkdtemp(path.join(work, 'go-'));
  const go = path.join(dir, 'go');
  await writeFile(
    go,
    `#!/bin/sh
if [ "$1" = version ]; then echo "go version go${version} linux/amd64"; exit 0; fi
echo build >> "${dir}/builds"
sleep 1
${opts.fail ? 'echo "go: module lookup disabled by GOPROXY=off" >&2; exit 1' : 'printf "#!/bin/sh\\necho temporal version 1.5.1\\n" > "$GOBIN/temporal"'}
`,
  );
  await chmod(go, 0o755);
  return go;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-cli-binary-'));
});
afterAll(() => rm(work, { recursive: true, force: true }));

describe('the Temporal CLI, built with Go when none is cached', () => {
  it('reads the Go version', () => {
    expect(parseGoVersion('go version go1.26.8 linux/amd64')).toEqual([1, 26]);
    expect(parseGoVersion('go version go1.19 linux/amd64')).toEqual([1, 19]);
    expect(parseGoVersion('bash: go: command not found')).toBeUndefined();
  });

  it('builds once into the cache when two starts ask at once, saying so, and leaves nothing half-written', async () => {
    const go = await fakeGo('1.22.1');
    const cacheDir = path.join(work, 'cache-a');
    const out = sink();
    const [a, b] = await Promise.all([
      ensureCliBinary({ cacheDir, go, progress: out.stream }),
      ensureCliBinary({ cacheDir, go, progress: out.stream }),
    ]);
    expect(a).toBe(cachedCliPath(cacheDir));
    expect(b).toBe(a);
    expect((await readFile(path.join(path.dirname(go), 'builds'), 'utf8')).trim().split('\n')).toHaveLength(1);
    expect(out.text()).toMatch(/building the Temporal CLI v1\.5\.1 with Go 1\.22 \(once; about 4 minutes/);
    expect(out.text()).toMatch(/Built the Temporal CLI in \d+s: /);
    expect(await readdir(path.dirname(a))).toEqual(['temporal']);
    // Cached: a later start builds nothing.
    await ensureCliBinary({ cacheDir, go, progress: out.stream });
    expect((await readFile(path.join(path.dirname(go), 'builds'), 'utf8')).trim().split('\n')).toHaveLength(1);
  });

  it('says what to install when Go is missing or too old, and shows the end of a failed build', async () => {
    const cacheDir = path.join(work, 'cache-b');
    const missing = ensureCliBinary({ cacheDir, go: path.join(work, 'no-such-go'), progress: sink().stream });
    await expect(missing).rejects.toThrow(CliUnavailableError);
    await expect(missing).rejects.toThrow(
      /Go was not found\. .*Go 1\.21 or newer .*TEMPORAL_CLI_PATH.*TEMPORAL_ADDRESS/,
    );
    await expect(ensureCliBinary({ cacheDir, go: await fakeGo('1.19'), progress: sink().stream })).rejects.toThrow(
      /Go 1\.19 is too old/,
    );
    await expect(
      ensureCliBinary({ cacheDir, go: await fakeGo('1.23', { fail: true }), progress: sink().stream }),
    ).rejects.toThrow(/Building the Temporal CLI failed .*\n.*GOPROXY=off/);
    expect(await readdir(path.join(cacheDir, 'temporal-cli', 'v1.5.1'))).toEqual([]);
  });

  it('builds with the Go that .ci/install-go cached when the Go on PATH is too old (Debian 12: 1.19)', async () => {
    const cacheDir = path.join(work, 'cache-c');
    const old = await fakeGo('1.19');
    const cached = path.join(cacheDir, 'go', 'go1.25.14', 'bin');
    await mkdir(cached, { recursive: true });
    // The cached toolchain: a copy of a fake 1.25 in its place ({cacheDir}/go/go1.25.14/bin/go).
    await writeFile(path.join(cached, 'go'), await readFile(await fakeGo('1.25')));
    await chmod(path.join(cached, 'go'), 0o755);
    const out = sink();
    const env = { ...process.env, PATH: `${path.dirname(old)}:${process.env.PATH}` };
    const built = await ensureCliBinary({ cacheDir, env, progress: out.stream });
    expect(built).toBe(cachedCliPath(cacheDir));
    expect(out.text()).toMatch(/with Go 1\.25 /);
  });

  it('npm start on a machine without Go and no cache: exit 1 with one sentence saying what to install, nothing left', async () => {
    const home = await mkdtemp(path.join(work, 'home-'));
    const database = `wfa_nogo_${path
      .basename(home)
      .slice(5)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '')}`;
    await ensureDatabase(inject('pgAdminUrl'), database);
    const dbUrl = new URL(inject('pgAdminUrl'));
    dbUrl.pathname = `/${database}`;
    await mkdir(path.join(home, 'bin'));
    // PATH with node only: no go. The SDK's download is pointed at a closed proxy (offline either way).
    await writeFile(path.join(home, 'bin', 'node'), `#!/bin/sh\nexec "${process.execPath}" "$@"\n`);
    await chmod(path.join(home, 'bin', 'node'), 0o755);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: path.join(home, 'bin'),
        HOME: home,
        DATA_DIR: path.join(home, 'data'),
        DATABASE_URL: dbUrl.toString(),
        HTTPS_PROXY: 'http://127.0.0.1:9',
        https_proxy: 'http://127.0.0.1:9',
        PORT: '0',
        TEMPORAL_DEV_SERVER_PORT: '0',
        TEMPORAL_UI_PORT: '0',
        LOG_LEVEL: 'silent',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise((r) => child.once('exit', r));
    expect(code).toBe(1);
    expect(err.trim()).toMatch(
      /^Startup failed: No Temporal dev server is cached and Go was not found\. Building the Temporal dev server needs Go 1\.21 or newer \(.*\)\. `bash \.ci\/install-go` in the clone installs Go from the Go module proxy .*; or set TEMPORAL_CLI_PATH to a temporal binary, or TEMPORAL_ADDRESS to a running Temporal\.$/,
    );
    // Nothing was built or left half-written in the empty cache.
    expect(await readdir(path.join(home, '.cache', 'wf-alter', 'temporal-cli', 'v1.5.1'))).toEqual([]);
  }, 60_000);
});
