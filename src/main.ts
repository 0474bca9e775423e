import { type Config, ConfigError, loadConfig } from './config.js';
import { Lifecycle, StopRequested } from './lifecycle.js';
import { createLogger, terminalStream } from './logger.js';
import { claimDataDir, DataDirInUseError } from './embedded/leftovers.js';
import { tuneHeapGrowth } from './memory.js';
import { assertPortsFree, PortInUseError, type PortUse } from './ports.js';
import { createService, type Role, type Service } from './service/index.js';

function roleFromArgs(argv: string[]): Role {
  if (argv.includes('--api')) return 'api';
  if (argv.includes('--worker')) return 'worker';
  return 'all';
}

/**
 * `npm start`: configuration, then the service (src/service.ts) with embedded Postgres and Temporal when
 * none is configured, the worker and the API in one process (`--api` / `--worker` run one role, the
 * production shape). The process's end belongs to `Lifecycle`: SIGINT/SIGTERM, a fatal worker error or a
 * failed start stop what was started, in order, and leave no child behind.
 */
async function main(): Promise<void> {
  const role = roleFromArgs(process.argv.slice(2));
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`Startup failed: ${describe(err)}\n`);
    process.exit(1);
  }
  tuneHeapGrowth(config.heapGrowingPercent);
  // A person at a terminal reads lines, without one per request; anything else (a supervisor, a pipe) gets JSON.
  const pretty = config.logFormat === 'pretty' || (config.logFormat === 'auto' && process.stdout.isTTY === true);
  if (pretty) config = { ...config, requestLogLevel: 'debug' };
  const logger = createLogger(config.logLevel, pretty ? terminalStream() : undefined);
  const life = new Lifecycle(logger);
  process.on('SIGINT', () => life.request('SIGINT', 0));
  process.on('SIGTERM', () => life.request('SIGTERM', 0));
  // A bug that escapes every handler stops the service in order (exit 1) instead of killing the process
  // and leaving its Postgres running.
  const fatal = (what: string) => (err: unknown) => {
    logger.fatal({ err }, what);
    life.request(what, 1);
  };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled rejection'));
  try {
    // The embedded stores of a data folder are this process's: a live service on it refuses the start, and
    // what a killed run left running in it is stopped first (src/embedded/leftovers.ts).
    const uses = { postgres: !config.databaseUrl, devServer: !config.temporal.address };
    const claim = uses.postgres || uses.devServer ? await claimDataDir(config.dataDir, uses, logger) : undefined;
    // Before anything is printed, generated or started: a taken port is one message naming it.
    await assertPortsFree(portsOf(role, config)).catch(async (err: unknown) => {
      await claim?.release(true);
      throw err;
    });
    if (claim) life.add('data folder claim', () => claim.release());
    // Whatever this process and its children (Temporal's SQLite, Postgres) create in DATA_DIR is private.
    process.umask(0o077);
    // Without its embedded Postgres, dev server or worker the service can do nothing: it stops (exit 1).
    // On a new machine the dev server's binary is built with Go (minutes): the API answers meanwhile.
    const service = await createService(config, {
      role,
      logger,
      stops: life,
      onLost: (why) => life.request(why, 1),
      temporalInBackground: true,
    });
    // The API port serves /metrics and the probes wherever there is an API: a second port would only differ.
    if (role !== 'worker' && config.metrics.port !== undefined)
      logger.warn('METRICS_PORT is for worker-only processes (--worker); this process serves /metrics on PORT');
    process.stdout.write(banner(service));
    life.started();
    if (service.embedded.temporalBuilding || service.embedded.temporalStarting) {
      service.engineReady.then(
        () => process.stdout.write(engineBanner(service)),
        // The service stops (exit 1); the reason is said as a failure at startup is, in one sentence.
        (err: unknown) => {
          if (!(err instanceof StopRequested) && life.requestedExitCode !== 0)
            process.stderr.write(`Startup failed: ${describe(err)}\n`);
        },
      );
    }
  } catch (err) {
    // A stop asked for during the start (a dependency lost, here before the banner) says why as a failed start
    // does; a signal's stop (exit 0) says nothing.
    if (!(err instanceof StopRequested)) process.stderr.write(`Startup failed: ${describe(err)}\n`);
    else if (life.requestedExitCode !== 0) process.stderr.write(`Startup failed: ${err.message}\n`);
    await life.stop();
  }
}

function banner(service: Service): string {
  const { config, embedded } = service;
  const base = `http://localhost:${config.port}`;
  const lines = [''];
  if (service.server)
    lines.push(
      `  API:          ${base}`,
      `  API docs:     ${base}/docs  (OpenAPI: ${base}/openapi.json)`,
      `  Console:      ${base}/console  (sign in as a user${service.generatedPassword ? ': below' : ': ADMIN_PASSWORD gives "admin"'})`,
    );
  if (embedded.temporalBuilding) {
    lines.push(
      '  Temporal:     building its dev server with Go, once per machine (about 4 minutes on 2 cores, longer on',
      '                a busy machine; the build prints a line every 30 s). The API, its docs and your stored data',
      '                answer now; plans and instances wait until Temporal is up (GET /health/ready says when).',
    );
  } else if (embedded.temporalStarting) {
    lines.push(
      '  Temporal:     its dev server is starting (seconds). The API, its docs and your stored data answer now;',
      '                plans and instances wait until it is up, which a line below says.',
    );
  } else lines.push(...temporalLines(service));
  if (embedded.postgresDataDir) lines.push(`  Postgres:     embedded, data in ${embedded.postgresDataDir}`);
  if (service.metricsServer) {
    const probes = `http://localhost:${config.metrics.port}`;
    lines.push(`  Metrics:      ${probes}/metrics  (health: ${probes}/health/live, /health/ready)`);
  }
  if (config.tracing.tracesUrl) {
    // Where spans go, without any credentials the URL may hold.
    const url = new URL(config.tracing.tracesUrl);
    lines.push(`  Traces:       OTLP to ${url.origin}${url.pathname}`);
  }
  if (service.generatedKey) {
    lines.push(
      '',
      '  A bootstrap admin API key was generated. It is shown this once and only its hash is stored:',
      `      Authorization: ApiKey ${service.generatedKey}`,
    );
  }
  if (service.generatedPassword) {
    lines.push(
      '',
      '  The console user "admin" was made, with a generated password shown this once (only its hash is stored;',
      '  ADMIN_PASSWORD sets another):',
      `      Username: admin    Password: ${service.generatedPassword}`,
    );
  }
  lines.push('', '  Ctrl-C stops everything.', '');
  return lines.join('\n') + '\n';
}

/** Where Temporal and the worker are, once Temporal is up. */
function temporalLines(service: Service): string[] {
  const { config, embedded } = service;
  const lines: string[] = [];
  if (embedded.temporal && config.temporal.uiPort > 0)
    lines.push(`  Temporal UI:  http://localhost:${config.temporal.uiPort}`);
  if (embedded.temporal)
    lines.push(`  Temporal:     ${embedded.temporal} (embedded dev server, data in ${config.dataDir})`);
  if (service.worker) lines.push(`  Worker:       task queue "${config.temporal.taskQueue}"`);
  return lines;
}

/** What a start that built or started Temporal in the background says once it is up. */
function engineBanner(service: Service): string {
  return (
    ['', '  Temporal is up: plans and instances run from here on.', ...temporalLines(service), ''].join('\n') + '\n'
  );
}

/** The ports this start listens on, with the setting that moves each. */
function portsOf(role: Role, config: Config): PortUse[] {
  const uses: PortUse[] = [];
  if (role !== 'worker') uses.push({ port: config.port, variable: 'PORT' });
  if (role === 'worker' && config.metrics.port !== undefined)
    uses.push({ port: config.metrics.port, variable: 'METRICS_PORT' });
  if (!config.databaseUrl) {
    uses.push({
      port: config.embeddedPostgresPort,
      variable: 'EMBEDDED_POSTGRES_PORT',
      host: '127.0.0.1',
      alternative: 'or DATABASE_URL to a Postgres of your own',
    });
  }
  if (!config.temporal.address) {
    uses.push({
      port: config.temporalDevServerPort,
      variable: 'TEMPORAL_DEV_SERVER_PORT',
      host: '127.0.0.1',
      alternative: 'or TEMPORAL_ADDRESS to a running Temporal',
    });
    uses.push({
      port: config.temporal.uiPort,
      variable: 'TEMPORAL_UI_PORT',
      host: '127.0.0.1',
      alternative: 'or 0 for no Web UI',
    });
  }
  return uses;
}

function describe(err: unknown): string {
  if (err instanceof ConfigError || err instanceof PortInUseError || err instanceof DataDirInUseError)
    return err.message;
  if (!(err instanceof Error)) return String(err);
  return `${err.message}${err.cause ? `\n  cause: ${String((err.cause as Error).message ?? err.cause)}` : ''}`;
}

void main();
