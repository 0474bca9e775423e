import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { elapsed, findGo, type GoBuildOptions, goInstall, MIN_GO, onceAcrossProcesses, run, say } from './go-build.js';

/**
 * The real Temporal server (not the dev server) and its schema tool, built from the official Go module
 * through the Go module proxy, once, into the cache: what the tests run as the production shape of
 * Temporal (frontend TLS, Postgres persistence, kill -9 and restart). With its Postgres schemas copied beside
 * it, so a later run needs neither Go nor the module cache.
 */

export const TEMPORAL_SERVER_VERSION = 'v1.29.1';
const MODULES = [
  `go.temporal.io/server/cmd/server@${TEMPORAL_SERVER_VERSION}`,
  `go.temporal.io/server/cmd/tools/sql@${TEMPORAL_SERVER_VERSION}`,
];
const MODULE = `go.temporal.io/server@${TEMPORAL_SERVER_VERSION}`;
const BUILD_MINUTES = 3;
/** In the module: the versioned schema folders of the Postgres (v12) plugin, each applied by temporal-sql-tool. */
const SCHEMAS = ['temporal', 'visibility'].map((db) => path.join('schema', 'postgresql', 'v12', db, 'versioned'));

/** The folder of the built server: `{cacheDir}/temporal-server/{version}` (cacheDir: ~/.cache/wf-alter). */
export const cachedServerDir = (cacheDir: string) => path.join(cacheDir, 'temporal-server', TEMPORAL_SERVER_VERSION);

/** What is in that folder. */
export interface TemporalServerTools {
  dir: string;
  /** `temporal-server --root … --config … --env … start` */
  server: string;
  /** `temporal-sql-tool --plugin postgres12 … create-database | setup-schema | update-schema` */
  sqlTool: string;
  /** The versioned schema folders (`update-schema -d`) of the default store and of SQL visibility. */
  schema: { temporal: string; visibility: string };
}

export function serverTools(dir: string): TemporalServerTools {
  return {
    dir,
    server: path.join(dir, 'temporal-server'),
    sqlTool: path.join(dir, 'temporal-sql-tool'),
    schema: { temporal: path.join(dir, SCHEMAS[0]!), visibility: path.join(dir, SCHEMAS[1]!) },
  };
}

/** Whether `dir` holds the binaries and the schemas (a folder from an interrupted build does not). */
export function isComplete(tools: TemporalServerTools): boolean {
  return [tools.server, tools.sqlTool, tools.schema.temporal, tools.schema.visibility].every((p) => existsSync(p));
}

export class ServerUnavailableError extends Error {
  override name = 'ServerUnavailableError';
}

const INSTALL_GO =
  `Building the Temporal server needs Go ${MIN_GO.join('.')} or newer. ` +
  '`bash .ci/install-go` in the clone installs Go from the Go module proxy into ~/.cache/wf-alter/go, where this finds it ' +
  '(or see https://go.dev/dl).';

/**
 * The cached server folder, built now if incomplete; each piece appears at its path only when complete
 * (built or copied in a temporary folder, then renamed), so an interrupted build leaves nothing
 * half-written. Binaries already there (an older layout, or a build whose schema copy was interrupted) are
 * kept: only what is missing is made.
 */
export async function ensureServerBinary(opts: GoBuildOptions): Promise<TemporalServerTools> {
  const tools = serverTools(cachedServerDir(opts.cacheDir));
  await onceAcrossProcesses(
    `${tools.dir}.lock`,
    () => isComplete(tools),
    () => build(opts, tools),
    opts,
    'Another process is building the Temporal server; waiting for it…\n',
  );
  return tools;
}

async function build(opts: GoBuildOptions, tools: TemporalServerTools): Promise<void> {
  const env = { ...(opts.env ?? process.env) };
  const { go, version } = await findGo(
    opts,
    env,
    (message) => new ServerUnavailableError(message),
    `The Temporal server ${TEMPORAL_SERVER_VERSION} is not built in ${tools.dir} and Go was not found.`,
    INSTALL_GO,
  );
  await mkdir(tools.dir, { recursive: true });
  const work = await mkdtemp(path.join(tools.dir, '.build-'));
  const started = Date.now();
  try {
    if (!existsSync(tools.server) || !existsSync(tools.sqlTool)) {
      say(
        opts,
        `Building the Temporal server ${TEMPORAL_SERVER_VERSION} and its SQL tool with Go ${version.join('.')} ` +
          `(once; about ${BUILD_MINUTES} minutes on 2 cores), into ${tools.dir}\n`,
      );
      const failed = (command: string, output: string) =>
        new ServerUnavailableError(`Building the Temporal server failed (${command}):\n${output}`);
      await goInstall(go, MODULES, work, opts, failed);
      // `go install` names each binary after its package folder: cmd/server → server, cmd/tools/sql → sql.
      for (const [built, target] of [
        ['server', tools.server],
        ['sql', tools.sqlTool],
      ] as const) {
        const from = path.join(work, built);
        if (!existsSync(from)) throw failed(`go install ${MODULES.join(' ')}`, `it built no ${built} binary`);
        await chmod(from, 0o755);
        await rm(target, { force: true });
        await rename(from, target);
      }
    }
    if (!existsSync(tools.schema.temporal) || !existsSync(tools.schema.visibility)) await copySchemas(go, env, tools);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  say(opts, `The Temporal server is ready in ${elapsed(started)}: ${tools.dir}\n`);
}

/**
 * The schema files from the module's source, which `go install` left in the module cache (or `go mod
 * download` fetches through the proxy): the module cache may be cleaned later, the cache folder stays.
 */
async function copySchemas(go: string, env: NodeJS.ProcessEnv, tools: TemporalServerTools): Promise<void> {
  // Outside any Go module (the cache folder), so no go.mod around is read or changed.
  const result = await run(go, ['mod', 'download', '-json', MODULE], { ...env, GOTOOLCHAIN: 'auto' }, tools.dir);
  let source: string | undefined;
  try {
    // stderr is in the output too (a toolchain download says so): the JSON object is stdout's.
    const json = result.output.slice(result.output.indexOf('{'), result.output.lastIndexOf('}') + 1);
    source = (JSON.parse(json) as { Dir?: string }).Dir;
  } catch {
    source = undefined;
  }
  if (result.code !== 0 || !source) {
    throw new ServerUnavailableError(
      `Fetching the Temporal server's schema failed (go mod download ${MODULE}, exit ${result.code}):\n${result.output.trim().split('\n').slice(-15).join('\n')}`,
    );
  }
  const staging = await mkdtemp(path.join(tools.dir, '.schema-'));
  try {
    for (const dir of SCHEMAS) await cp(path.join(source, dir), path.join(staging, dir), { recursive: true });
    // Copies of read-only module files: writable again, so the cache folder can be deleted like any other.
    await run('chmod', ['-R', 'u+w', staging], env);
    await rm(path.join(tools.dir, 'schema'), { recursive: true, force: true });
    await rename(path.join(staging, 'schema'), path.join(tools.dir, 'schema'));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** `tsx src/temporal/server-binary.ts`: builds (or finds) the server and prints its folder; `.ci/run` uses it. */
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { loadConfig } = await import('../config.js');
  ensureServerBinary({ cacheDir: loadConfig().cacheDir }).then(
    (tools) => process.stdout.write(`${tools.dir}\n`),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
