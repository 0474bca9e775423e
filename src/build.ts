import { cp, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { slimWorkflowBundle } from './temporal/bundle.js';

/**
 * The second half of `npm run build` (after `tsc -p tsconfig.build.json`), run from the compiled output:
 * bundles the workflows once into dist/workflow-bundle.js (a worker started from the build loads it with
 * `workflowBundle`, instead of bundling at every start) and copies what the code reads from disk (the
 * migrations, the console's assets).
 */
const here = path.dirname(fileURLToPath(import.meta.url)); // dist/src
const dist = path.dirname(here);
const root = path.dirname(dist);

const noop = () => undefined;
const { code } = await bundleWorkflowCode({
  workflowsPath: path.join(dist, 'workflows', 'index.js'),
  // The tracing interceptors belong in every bundle (src/temporal/bundle.ts, WORKFLOW_INTERCEPTORS_PATH).
  workflowInterceptorModules: [path.join(dist, 'workflows', 'interceptors.js')],
  logger: { trace: noop, debug: noop, info: noop, warn: console.warn, error: console.error, log: noop },
});
const bundle = slimWorkflowBundle(code);
await writeFile(path.join(dist, 'workflow-bundle.js'), bundle);
await mkdir(path.join(here, 'db', 'migrations'), { recursive: true });
await cp(path.join(root, 'src', 'db', 'migrations'), path.join(here, 'db', 'migrations'), { recursive: true });
// The workflow threads' preload, plain JavaScript (src/temporal/workflow-vm.mjs).
await cp(path.join(root, 'src', 'temporal', 'workflow-vm.mjs'), path.join(here, 'temporal', 'workflow-vm.mjs'));
// The console's own stylesheet and script, served from beside its compiled code (src/console/assets.ts).
await cp(path.join(root, 'src', 'console', 'assets'), path.join(here, 'console', 'assets'), { recursive: true });
process.stdout.write(`Built dist/ (workflow bundle: ${Math.round(bundle.length / 1024)} KiB)\n`);
