/**
 * `npm run fuzz`: schemathesis against a freshly started service, as an outside client sees it.
 *
 * Starts `src/main.ts` with a new DATA_DIR and free ports (embedded Postgres and Temporal dev server,
 * unless DATABASE_URL / TEMPORAL_ADDRESS are set), waits for /health, then runs every schemathesis phase
 * (examples, coverage, fuzzing, stateful) over /openapi.json with a bounded number of examples per
 * operation. The run fails on any server error (5xx) or any response that does not match the OpenAPI
 * document. The service is stopped (and its folder removed) whatever happens.
 *
 * Schemathesis comes from PyPI: `.ci/run` installs it into a virtualenv outside the repository; set
 * SCHEMATHESIS to another binary if you have one. FUZZ_MAX_EXAMPLES (default 30) bounds each operation.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../support/free-port.js';

const root = path.resolve(import.meta.dirname, '..', '..');
const cacheHome = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
const schemathesis =
  process.env.SCHEMATHESIS ?? path.join(cacheHome, 'wf-alter', 'schemathesis-venv', 'bin', 'schemathesis');
const maxExamples = process.env.FUZZ_MAX_EXAMPLES ?? '30';

async function waitForHealth(url: string, child: { exitCode: number | null }, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`the service exited with code ${child.exitCode} before it was healthy`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`the service was not healthy within ${timeoutMs / 1000} s`);
}

/**
 * Real resources for the fuzzer to reach past the 404s: a definition with a suspended and a faulting
 * path, instances of it, a connection and a finished plan. Their ids become schemathesis parameters.
 */
async function seed(base: string, adminKey: string): Promise<Record<string, string>> {
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `ApiKey ${adminKey}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (res.status >= 300) throw new Error(`seeding ${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const literal = (typeName: string, value: unknown) => ({ typeName, expression: { type: 'Literal', value } });
  await call('POST', '/connection-configuration', {
    name: 'fuzz-api',
    connectionType: 'Elsa.Connections.Http.HttpConnectionConfiguration',
    connectionConfiguration: { baseUrl: 'http://127.0.0.1:9/base/' },
  });
  await call('POST', '/workflow-definitions', {
    definitionId: 'fuzz-def',
    name: 'Fuzz definition',
    variables: [{ id: 'amount', name: 'Amount', typeName: 'Int32', value: 1 }],
    root: {
      type: 'Elsa.Flowchart',
      id: 'flow1',
      activities: [
        { id: 'start', type: 'Elsa.WriteLine', text: literal('String', 'started') },
        { id: 'wait', type: 'Elsa.Event', eventName: literal('String', 'go') },
        {
          id: 'call',
          type: 'Elsa.Http.SendHttpRequest',
          connection: literal('ConnectionProperties<Elsa.Connections.Http.HttpConnectionConfiguration>', {
            connectionName: 'fuzz-api',
          }),
          method: literal('String', 'GET'),
          path: literal('String', 'x'),
        },
      ],
      connections: [
        { source: { activity: 'start', port: 'Done' }, target: { activity: 'wait', port: 'In' } },
        { source: { activity: 'wait', port: 'Done' }, target: { activity: 'call', port: 'In' } },
      ],
    },
  });
  const instance = await call('POST', '/workflow-instances', { definitionId: 'fuzz-def', correlationId: 'fuzz-1' });
  await call('POST', '/workflow-instances', { definitionId: 'fuzz-def', correlationId: 'fuzz-2' });
  const plan = await call('POST', '/alterations/submit', {
    id: 'fuzz-plan',
    alterations: [{ type: 'ModifyVariable', variableId: 'amount', value: 2 }],
    filter: { definitionIds: ['fuzz-def'] },
  });
  return {
    definitionId: 'fuzz-def',
    activityType: 'Elsa.Http.SendHttpRequest',
    inputName: 'connection',
    eventName: 'go',
    type: 'Elsa.Connections.Http.HttpConnectionConfiguration',
    planId: String(plan.planId),
    id: String(instance.workflowInstanceId),
  };
}

async function main(): Promise<number> {
  if (!existsSync(schemathesis)) {
    process.stderr.write(
      `schemathesis not found at ${schemathesis}. Install it: python3 -m venv ${path.dirname(path.dirname(schemathesis))} && ${path.dirname(schemathesis)}/pip install schemathesis (or set SCHEMATHESIS).\n`,
    );
    return 2;
  }
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'wfa-fuzz-'));
  const port = await freePort();
  const adminKey = `wfa_fuzz_${randomBytes(24).toString('base64url')}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: String(port),
    EMBEDDED_POSTGRES_PORT: String(await freePort()),
    TEMPORAL_DEV_SERVER_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: '0',
    ADMIN_API_KEY: adminKey,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    // Activities of fuzzed definitions must not reach anything on this machine.
    OUTBOUND_HTTP_ALLOW_NETWORKS: '',
  };
  const service = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const serviceLog: string[] = [];
  service.stdout.on('data', (d: Buffer) => serviceLog.push(d.toString()));
  service.stderr.on('data', (d: Buffer) => serviceLog.push(d.toString()));
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitForHealth(base, service).catch((err: unknown) => {
      process.stderr.write(serviceLog.join(''));
      throw err;
    });
    const parameters = await seed(base, adminKey);
    const configFile = path.join(dataDir, 'schemathesis.toml');
    await writeFile(
      configFile,
      `parameters = { ${Object.entries(parameters)
        .map(([k, v]) => `${k} = ${JSON.stringify(v)}`)
        .join(', ')} }\n`,
    );
    const args = [
      '--config-file',
      configFile,
      'run',
      `${base}/openapi.json`,
      '--header',
      `Authorization: ApiKey ${adminKey}`,
      '--phases',
      'examples,coverage,fuzzing,stateful',
      '--checks',
      'not_a_server_error,response_schema_conformance,content_type_conformance',
      '--max-examples',
      maxExamples,
      '--seed',
      process.env.FUZZ_SEED ?? '20261122',
      '--workers',
      '2',
      '--request-timeout',
      '30',
      '--suppress-health-check',
      'all',
      '--report',
      'junit',
      '--report-dir',
      path.join(dataDir, 'report'),
      '--continue-on-failure',
    ];
    process.stdout.write(`schemathesis ${args.filter((a) => !a.startsWith('Authorization')).join(' ')}\n`);
    const fuzz = spawn(schemathesis, args, {
      cwd: dataDir,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, SCHEMATHESIS_HOOKS: '' },
    });
    // Schemathesis prints pytest-like banners ("==== 2 warnings in 27.94s ====") that a reader of CI logs
    // takes for a pytest run that executed no test: they are shown as "--- … ---" lines instead.
    const output: string[] = [];
    let pending = '';
    const show = (text: string) => process.stdout.write(text.replace(/^={3,} (.*?) ={3,}$/gm, '--- $1 ---'));
    fuzz.stdout.on('data', (d: Buffer) => {
      output.push(d.toString());
      pending += d.toString();
      const end = pending.lastIndexOf('\n') + 1;
      show(pending.slice(0, end));
      pending = pending.slice(end);
    });
    fuzz.stdout.on('end', () => show(pending));
    const code: number = await new Promise((resolve) => fuzz.on('close', (c) => resolve(c ?? 1)));
    const serverErrors = serviceLog
      .join('')
      .split('\n')
      .filter((l) => l.includes('"unhandled error"'));
    if (serverErrors.length)
      process.stdout.write(
        `\n${serverErrors.length} unhandled errors in the service log, first:\n${serverErrors[0]}\n`,
      );
    // One plain closing line with the counts, as the test suite ends.
    const counts = casesOf(output.join(''));
    const failed = Math.max(counts.failed, code === 0 ? 0 : 1);
    process.stdout.write(`\nfuzz: ${counts.passed} passed, ${failed} failed\n`);
    return code;
  } finally {
    service.kill('SIGTERM');
    await new Promise((resolve) => {
      const timer = setTimeout(() => {
        service.kill('SIGKILL');
        resolve(undefined);
      }, 30_000);
      service.on('exit', () => {
        clearTimeout(timer);
        resolve(undefined);
      });
    });
    await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The "Test cases: N generated, N passed[, N failed]" of schemathesis's summary. */
function casesOf(text: string): { passed: number; failed: number } {
  // eslint-disable-next-line no-control-regex
  const plain = text.replace(/\u001b\[[0-9;]*m/g, '');
  const line = /(\d+) generated, ([^\n]*)/.exec(plain)?.[2] ?? '';
  const count = (what: string) => Number(new RegExp(`(\\d+) ${what}`).exec(line)?.[1] ?? 0);
  return { passed: count('passed'), failed: count('failed') };
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fuzz: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
