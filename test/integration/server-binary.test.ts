import { chmod, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedServerDir, ensureServerBinary, ServerUnavailableError } from '../../src/temporal/server-binary.js';
import { sink } from '../support/sink.js';

let work: string;

/**
 * A stand-in for `go`: a version; for `install`, `server` and `sql` written into GOBIN after a pause; for
 * `mod download -json`, a module folder with the two versioned schema folders. Each call is counted.
 */
async function fakeGo(version: string, opts: { fail?: boolean } = {}): Promise<string> {
  const dir = await mkdtemp(path.join(work, 'go-'));
  const module = path.join(dir, 'module');
  for (const db of ['temporal', 'visibility']) {
    const versioned = path.join(module, 'schema', 'postgresql', 'v12', db, 'versioned', 'v1.0');
    await mkdir(versioned, { recursive: true });
    await writeFile(path.join(versioned, 'schema.sql'), `-- ${db}\n`);
  }
  const go = path.join(dir, 'go');
  await writeFile(
    go,
    `#!/bin/sh
if [ "$1" = version ]; then echo "go version go${version} linux/amd64"; exit 0; fi
echo "$1" >> "${dir}/calls"
if [ "$1" = mod ]; then echo "go: downloading go.temporal.io/server v1.29.1" >&2; printf '{"Path":"go.temporal.io/server","Dir":"${module}"}\\n'; exit 0; fi
sleep 1
${
  opts.fail
    ? 'echo "go: module lookup disabled by GOPROXY=off" >&2; exit 1'
    : 'for b in server sql; do printf "#!/bin/sh\\necho $b\\n" > "$GOBIN/$b"; done'
}
`,
  );
  await chmod(go, 0o755);
  return go;
}

const calls = async (go: string) =>
  (await readFile(path.join(path.dirname(go), 'calls'), 'utf8').catch(() => '')).trim().split('\n').filter(Boolean);

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'wfa-server-binary-'));
});
afterAll(() => rm(work, { recursive: true, force: true }));

describe('the real Temporal server, built with Go when none is cached', () => {
  it('builds the server and the SQL tool once when two ask at once, with the schemas beside them', async () => {
    const go = await fakeGo('1.26.8');
    const cacheDir = path.join(work, 'cache-a');
    const out = sink();
    const [a, b] = await Promise.all([
      ensureServerBinary({ cacheDir, go, progress: out.stream }),
      ensureServerBinary({ cacheDir, go, progress: out.stream }),
    ]);
    expect(a).toEqual(b);
    expect(a.dir).toBe(cachedServerDir(cacheDir));
    expect(await calls(go)).toEqual(['install', 'mod']);
    expect(out.text()).toMatch(/Building the Temporal server v1\.29\.1 and its SQL tool with Go 1\.26 \(once/);
    expect((await readdir(a.dir)).sort()).toEqual(['schema', 'temporal-server', 'temporal-sql-tool']);
    expect(await readdir(a.schema.temporal)).toEqual(['v1.0']);
    expect(await readdir(a.schema.visibility)).toEqual(['v1.0']);
    // Complete: nothing is built again.
    await ensureServerBinary({ cacheDir, go, progress: out.stream });
    expect(await calls(go)).toEqual(['install', 'mod']);
  });

  it('keeps binaries an earlier build left (server, sql and their links) and only copies the schemas', async () => {
    const go = await fakeGo('1.26.8');
    const cacheDir = path.join(work, 'cache-b');
    const dir = cachedServerDir(cacheDir);
    await mkdir(dir, { recursive: true });
    for (const b of ['server', 'sql']) await writeFile(path.join(dir, b), '#!/bin/sh\n', { mode: 0o755 });
    await symlink('server', path.join(dir, 'temporal-server'));
    await symlink('sql', path.join(dir, 'temporal-sql-tool'));
    const tools = await ensureServerBinary({ cacheDir, go, progress: sink().stream });
    expect(await calls(go)).toEqual(['mod']);
    expect(await readdir(tools.schema.temporal)).toEqual(['v1.0']);
  });

  it('says what to install without Go, and shows the end of a failed build, leaving nothing behind', async () => {
    const cacheDir = path.join(work, 'cache-c');
    await expect(
      ensureServerBinary({ cacheDir, go: path.join(work, 'no-such-go'), progress: sink().stream }),
    ).rejects.toThrow(/is not built in .* and Go was not found\. Building the Temporal server needs Go 1\.21 or newer/);
    const failing = ensureServerBinary({ cacheDir, go: await fakeGo('1.23', { fail: true }), progress: sink().stream });
    await expect(failing).rejects.toThrow(ServerUnavailableError);
    await expect(failing).rejects.toThrow(
      /Building the Temporal server failed \(go install .*exit 1\):\n.*GOPROXY=off/,
    );
    expect(await readdir(cachedServerDir(cacheDir))).toEqual([]);
  });
});
