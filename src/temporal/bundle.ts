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

/** The inline source map's comment, up to its data (webpack writes `data:application/json;charset=utf-8;base64,`). */
const SOURCE_MAP_COMMENT = '//# sourceMappingURL=data:';
const BASE64 = 'base64,';

/**
 * The workflow bundle as the worker keeps it: the SDK holds the bundle's text and its parsed source map in the
 * service's thread and again in its workflow thread. webpack's bundle (3.5 million characters) carries the
 * source of every bundled module in its inline source map (`sourcesContent`, 1.2 MB) and a handful of non-ASCII
 * characters (in comments and messages), for which V8 stores the whole text at two bytes a character. Without
 * the sources (stack traces need only the mappings; the SDK reads the sources only for the worker option
 * `showStackTraceSources`, which the service leaves off) and with those characters written as `\uXXXX` escapes (the
 * same values in strings, nothing in comments), it is 1.9 million characters at one byte each: about 5 MB less in
 * each thread. Columns shift on the few lines that had such a character; lines and files map as before.
 */
export function slimWorkflowBundle(code: string): string {
  const comment = code.lastIndexOf(SOURCE_MAP_COMMENT);
  const data = comment < 0 ? -1 : code.indexOf(BASE64, comment);
  if (data < 0) return code;
  const map = JSON.parse(Buffer.from(code.slice(data + BASE64.length).trim(), 'base64').toString('utf8')) as {
    sourcesContent?: unknown;
  };
  delete map.sourcesContent;
  const text = code
    .slice(0, data + BASE64.length)
    .replace(/[\u0080-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `${text}${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

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
  process.stdout.write(slimWorkflowBundle(code), () => process.exit(0));
}
