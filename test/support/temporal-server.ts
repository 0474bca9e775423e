import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { guardChild } from '../../src/embedded/guardian.js';
import { cachedCliPath, ensureCliBinary } from '../../src/temporal/cli-binary.js';
import { findGo } from '../../src/temporal/go-build.js';
import {
  cachedServerDir,
  ensureServerBinary,
  isComplete,
  serverTools,
  type TemporalServerTools,
} from '../../src/temporal/server-binary.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.js';
import { type CertFiles, createCa, issueCert } from './certificates.js';
import { freePort } from './free-port.js';
import { kill9, type Spawned, spawnKept, stopProcess, waitUntil } from './processes.js';

const exec = promisify(execFile);

/** The Postgres the server keeps its state in (any Postgres: the server creates its two databases). */
export interface TemporalPostgres {
  host: string;
  port: number;
  user: string;
  /** Without spaces: Temporal 1.29 escapes it into its DSN as a query value, a space becoming a '+'. */
  password: string;
}

export interface TemporalServerOptions {
  /** The server's binaries and schemas (`findTemporalServerTools`). */
  tools: TemporalServerTools;
  /** The `temporal` CLI (namespace and search attributes are created with it, as an operator would). */
  cli: string;
  /** A folder of its own for the config, the certificates and the log (created). */
  dir: string;
  postgres: TemporalPostgres;
  /** The databases of the default store and of visibility: `temporal` and `temporal_visibility` by default. */
  databases?: { temporal: string; visibility: string };
  /**
   * TLS on the frontend, from a CA generated in `dir/certs`; `mutual`: the frontend also requires a client
   * certificate from that CA (`certs.client`).
   */
  tls?: { mutual?: boolean };
}

/** What a client needs to reach a TLS frontend: the CA that signed it, and a client certificate for mTLS. */
export interface TemporalServerCerts {
  ca: string;
  client: CertFiles;
}

const NAMESPACE = 'default';
/** The frontend answering, after a start (schema checks, membership, shard acquisition). */
const READY_TIMEOUT_MS = 90_000;

/**
 * The real Temporal server (`temporal-server`, not the dev server) as a separate OS process on a given
 * Postgres, with SQL visibility on the same Postgres, all services in one process on free loopback ports:
 * the production shape of Temporal that the service must work against (TLS on the frontend, state that
 * survives a `kill -9`). `create` sets up the databases and the config; `start` starts it (again after
 * `kill9` or `stop`, on the same databases) and, the first time, creates the namespace and registers the
 * service's search attributes.
 */
export class TemporalServer {
  private proc: Spawned | undefined;
  private prepared = false;

  private constructor(
    private readonly opts: TemporalServerOptions,
    readonly port: number,
    private readonly configDir: string,
    /** Set when the frontend serves TLS. */
    readonly certs: TemporalServerCerts | undefined,
  ) {}

  static async create(opts: TemporalServerOptions): Promise<TemporalServer> {
    const dir = path.resolve(opts.dir);
    const configDir = path.join(dir, 'config');
    await mkdir(configDir, { recursive: true });
    const dbs = opts.databases ?? { temporal: 'temporal', visibility: 'temporal_visibility' };
    await setUpDatabase(opts, dbs.temporal, opts.tools.schema.temporal);
    await setUpDatabase(opts, dbs.visibility, opts.tools.schema.visibility);

    let certs: (TemporalServerCerts & { server: CertFiles }) | undefined;
    if (opts.tls) {
      const certDir = path.join(dir, 'certs');
      const ca = await createCa(certDir);
      certs = {
        ca: ca.cert,
        server: await issueCert(ca, certDir, 'server', {
          commonName: 'localhost',
          altNames: ['DNS:localhost', 'IP:127.0.0.1'],
        }),
        client: await issueCert(ca, certDir, 'client', { commonName: 'workflow-alterations' }),
      };
    }
    const ports = {
      frontend: await freePort(),
      frontendHttp: await freePort(),
      frontendMembership: await freePort(),
      history: await freePort(),
      historyMembership: await freePort(),
      matching: await freePort(),
      matchingMembership: await freePort(),
      worker: await freePort(),
      workerMembership: await freePort(),
    };
    const dynamicConfig = path.join(configDir, 'dynamicconfig.yaml');
    await writeFile(dynamicConfig, DYNAMIC_CONFIG);
    await writeFile(
      path.join(configDir, 'temporal.yaml'),
      serverConfig({ ...opts, databases: dbs }, ports, dynamicConfig, certs),
    );
    return new TemporalServer({ ...opts, dir }, ports.frontend, configDir, certs);
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** The server's pid while it runs (a test may check it is gone). */
  get pid(): number | undefined {
    return this.proc && !this.proc.done() ? this.proc.child.pid : undefined;
  }

  /** Starts the server and waits until its frontend answers; the first start also creates the namespace. */
  async start(): Promise<void> {
    if (this.proc && !this.proc.done()) throw new Error('the Temporal server is already running');
    // There is no --config-file in v1.29: the config is `{root}/{config}/{env}.yaml`.
    const proc = spawnKept(
      this.opts.tools.server,
      ['--root', this.opts.dir, '--config', 'config', '--env', 'temporal', '--allow-no-auth', 'start'],
      { cwd: this.opts.dir, detached: true },
    );
    this.proc = proc;
    // Stopped even if the test process dies without stopping it.
    guardChild(proc.child, { signal: 'TERM', graceSeconds: 20 });
    await waitUntil(
      `the Temporal server's frontend on ${this.address}`,
      async () => ((await this.cli(['operator', 'namespace', 'list'])) ? true : undefined),
      READY_TIMEOUT_MS,
      proc,
    );
    if (!this.prepared) {
      await this.prepareNamespace();
      this.prepared = true;
    }
  }

  /** SIGKILL, as a crash would end it; `start` again resumes on the same databases. */
  async kill9(): Promise<void> {
    if (this.proc) await kill9(this.proc);
  }

  /** SIGTERM, SIGKILL past 20 s. */
  async stop(): Promise<void> {
    if (this.proc) await stopProcess(this.proc);
  }

  /** The server's output (kept for a failure's message). */
  tail(lines = 40): string {
    return this.proc?.tail(lines) ?? '';
  }

  /** Runs the `temporal` CLI against this server (flags after the subcommand); its stdout, or undefined if it failed. */
  async cli(args: string[]): Promise<string | undefined> {
    const tls = this.certs
      ? [
          '--tls',
          '--tls-ca-path',
          this.certs.ca,
          ...(this.opts.tls?.mutual
            ? ['--tls-cert-path', this.certs.client.cert, '--tls-key-path', this.certs.client.key]
            : []),
        ]
      : [];
    return exec(this.opts.cli, [...args, '--address', this.address, ...tls], { timeout: 30_000 }).then(
      (r) => r.stdout,
      () => undefined,
    );
  }

  private async prepareNamespace(): Promise<void> {
    if (!(await this.cli(['operator', 'namespace', 'describe', '--namespace', NAMESPACE]))) {
      const created = await this.cli([
        'operator',
        'namespace',
        'create',
        '--namespace',
        NAMESPACE,
        '--retention',
        '24h',
      ]);
      if (created === undefined) throw new Error(`could not create the namespace ${NAMESPACE}\n${this.tail()}`);
    }
    // Right after its creation the frontend's namespace registry (refreshed every few seconds) does not know
    // the namespace yet: "Namespace default is not found" for a second or two.
    await waitUntil(
      'the search attributes to be registered',
      () =>
        this.cli([
          'operator',
          'search-attribute',
          'create',
          '--namespace',
          NAMESPACE,
          ...SEARCH_ATTRIBUTES.flatMap((k) => [
            '--name',
            k.name,
            '--type',
            k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword',
          ]),
        ]),
      30_000,
      this.proc,
    );
  }
}

/** `temporal-sql-tool`: the database, its base schema (0.0), then every versioned step. */
async function setUpDatabase(opts: TemporalServerOptions, database: string, versioned: string): Promise<void> {
  const { host, port, user, password } = opts.postgres;
  const base = ['--plugin', 'postgres12', '--ep', host, '-p', String(port), '-u', user, '--pw', password];
  const steps = [['create-database'], ['setup-schema', '-v', '0.0'], ['update-schema', '-d', versioned]];
  for (const step of steps) {
    await exec(opts.tools.sqlTool, [...base, '--db', database, ...step], { timeout: 120_000 }).catch(
      (err: { stderr?: string; stdout?: string; message: string }) => {
        // The tool prints the password in no message; the command line (with --pw) is left out of ours.
        throw new Error(
          `temporal-sql-tool ${step[0]} of ${database} failed:\n${(err.stderr || err.stdout || err.message).trim().split('\n').slice(-10).join('\n')}`,
        );
      },
    );
  }
}

/**
 * What the service's own dev server gets (src/temporal/devserver.ts) and a production Temporal needs
 * (docs/operations.md, "Running in production"): eager activities and workflow starts, Task Queue Fairness with one partition,
 * updates; and search attributes read fresh, so that one registered a moment ago is usable at once.
 */
const DYNAMIC_CONFIG = `system.enableEagerWorkflowStart:
  - value: true
system.enableActivityEagerExecution:
  - value: true
matching.useNewMatcher:
  - value: true
matching.enableFairness:
  - value: true
matching.numTaskqueueReadPartitions:
  - value: 1
matching.numTaskqueueWritePartitions:
  - value: 1
frontend.enableUpdateWorkflowExecution:
  - value: true
frontend.enableUpdateWorkflowExecutionAsyncAccepted:
  - value: true
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
`;

/** YAML, with every value JSON-quoted (JSON is YAML): a password of any characters stays one string. */
function serverConfig(
  opts: TemporalServerOptions & { databases: { temporal: string; visibility: string } },
  ports: Record<
    | 'frontend'
    | 'frontendHttp'
    | 'frontendMembership'
    | 'history'
    | 'historyMembership'
    | 'matching'
    | 'matchingMembership'
    | 'worker'
    | 'workerMembership',
    number
  >,
  dynamicConfig: string,
  certs: (TemporalServerCerts & { server: CertFiles }) | undefined,
): string {
  const q = (v: string) => JSON.stringify(v);
  const { host, port, user, password } = opts.postgres;
  const store = (database: string, conns: number) => `      sql:
        pluginName: "postgres12"
        databaseName: ${q(database)}
        connectAddr: ${q(`${host}:${port}`)}
        connectProtocol: "tcp"
        user: ${q(user)}
        password: ${q(password)}
        maxConns: ${conns}
        maxIdleConns: ${conns}
        maxConnLifetime: "1h"`;
  const service = (grpc: number, membership: number, http?: number) => `    rpc:
      grpcPort: ${grpc}
      membershipPort: ${membership}
      bindOnIP: "127.0.0.1"${http ? `\n      httpPort: ${http}` : ''}`;
  // The frontend serves TLS; internode traffic (history, matching) stays plain on loopback. The server's
  // own clients of its frontend (the worker service's SDK client, internal frontend clients) are clients
  // like any other: without a CA to trust (and, for mTLS, a certificate to present) the worker service
  // fails after 60 s ("error creating sdk client").
  const tls = certs
    ? `
  tls:
    frontend:
      server:
        certFile: ${q(certs.server.cert)}
        keyFile: ${q(certs.server.key)}
        requireClientAuth: ${opts.tls?.mutual ? 'true' : 'false'}
        clientCaFiles:
          - ${q(certs.ca)}
      client:
        serverName: "localhost"
        rootCaFiles:
          - ${q(certs.ca)}
    systemWorker:
      certFile: ${q(certs.server.cert)}
      keyFile: ${q(certs.server.key)}
      client:
        serverName: "localhost"
        rootCaFiles:
          - ${q(certs.ca)}`
    : '';
  return `log:
  stdout: true
  level: "warn"

persistence:
  defaultStore: "postgres-default"
  visibilityStore: "postgres-visibility"
  numHistoryShards: 4
  datastores:
    postgres-default:
${store(opts.databases.temporal, 20)}
    postgres-visibility:
${store(opts.databases.visibility, 10)}

global:
  membership:
    maxJoinDuration: "30s"
    broadcastAddress: "127.0.0.1"
  pprof:
    port: 0${tls}

services:
  frontend:
${service(ports.frontend, ports.frontendMembership, ports.frontendHttp)}
  history:
${service(ports.history, ports.historyMembership)}
  matching:
${service(ports.matching, ports.matchingMembership)}
  worker:
${service(ports.worker, ports.workerMembership)}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: ${q(`127.0.0.1:${ports.frontend}`)}

dcRedirectionPolicy:
  policy: "noop"

dynamicConfigClient:
  filepath: ${q(dynamicConfig)}
  pollInterval: "10s"
`;
}

/**
 * The server's tools: TEMPORAL_SERVER_DIR (set by .ci/run), else the cached build, else built now with Go
 * (about 3 minutes, once). Undefined, with the reason, when none is there and Go is not either: a test
 * then skips saying so (CI always has it).
 */
export async function findTemporalServerTools(
  cacheDir: string,
): Promise<{ tools: TemporalServerTools; cli: string } | { missing: string }> {
  const env = process.env.TEMPORAL_SERVER_DIR;
  const cliPath = process.env.TEMPORAL_CLI_PATH || cachedCliPath(cacheDir);
  let tools: TemporalServerTools | undefined;
  if (env) {
    tools = serverTools(env);
    if (!isComplete(tools))
      throw new Error(`TEMPORAL_SERVER_DIR=${env} lacks temporal-server, temporal-sql-tool or the schema folders`);
  } else if (isComplete(serverTools(cachedServerDir(cacheDir)))) {
    tools = serverTools(cachedServerDir(cacheDir));
  } else {
    const go = await findGo({ cacheDir }, process.env, (m) => new Error(m), 'no Go', '').catch(() => undefined);
    if (!go)
      return {
        missing: `the Temporal server is not built in ${cachedServerDir(cacheDir)} and Go is not installed (npx tsx src/temporal/server-binary.ts builds it)`,
      };
    tools = await ensureServerBinary({ cacheDir });
  }
  const cli = existsSync(cliPath) ? cliPath : await ensureCliBinary({ cacheDir });
  return { tools, cli };
}
