import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

/** The workflows' entry point, in the source tree. */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

/**
 * The workflow interceptors (tracing, workflows/interceptors.ts), in the source tree. A worker given a
 * pre-built bundle ignores `interceptors.workflowModules`: every bundle must include them itself
 * (`workflowInterceptorModules`), or traces stop at the workflow. test/unit/workflow-bundles.test.ts checks
 * that every `bundleWorkflowCode` call does.
 */
export const WORKFLOW_INTERCEPTORS_PATH = fileURLToPath(new URL('../../workflows/interceptors.ts', import.meta.url));

const noop = () => undefined;
const quiet = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

/**
 * The workflow code bundled in a child process, its text read from the child's standard output.
 *
 * A worker started from source (`npm start` runs tsx) bundles `workflows/` with webpack. In the service's
 * own process that cost about 120 MB of RSS that V8 and malloc never gave back (measured: 126 MB before
 * the bundle, 248 MB after, 244 MB after a full GC), a third of an idle service. In a child, that memory
 * goes with the child. A build (`npm run build`) bundles once instead, and tests bundle once per run.
 */
export async function bundleWorkflowsApart(): Promise<string> {
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, WFA_BUNDLE_CHILD: '1' },
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) {
    const why = Buffer.concat(err).toString('utf8').trim().split('\n').slice(-5).join('\n');
    throw new Error(`Bundling the workflow code failed (exit ${code}): ${why || 'no output'}`);
  }
  return Buffer.concat(out).toString('utf8');
}

// The child: bundle, write the code to standard output, exit.
if (process.env.WFA_BUNDLE_CHILD === '1' && process.argv[1] === fileURLToPath(import.meta.url)) {
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [WORKFLOW_INTERCEPTORS_PATH],
    logger: quiet,
  });
  process.stdout.write(code, () => process.exit(0));
}
