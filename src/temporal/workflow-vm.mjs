/**
 * Plain JavaScript, not TypeScript: a preload runs in the workflow threads before anything could compile
 * TypeScript there (tsx's hooks do not reach a preload of a worker thread); the build copies it to dist/.
 *
 * Preloaded into every process of the service (`node --import …/workflow-vm`: the npm scripts, the Dockerfile
 * and compose file, the benches and the cluster test; see `WORKFLOW_VM_PRELOAD` in src/memory.ts). In the
 * Temporal SDK's workflow threads it drops the `timeout` of each `vm` call into a workflow's sandbox.
 *
 * Why: the SDK enters the sandbox several times per activation, each time with `timeout` (its 5 s
 * `isolateExecutionTimeout`, a deadlock check), and Node runs every call with a timeout under a watchdog of its
 * own: a new event loop and a new OS thread, created and joined per call. Measured on the 2-core machine of
 * bench/README.md: 175–295 µs a call with the timeout, 1–8 µs without; in a CPU profile of `bench:engine` the
 * workflow thread spent 39 s of its 103 s busy in `runInContext` itself, and instances listed Completed in the
 * Temporal UI after a trigger went from 1.64x to 1.18x bare Temporal's time.
 *
 * What it gives up: the SDK's deadlock check of workflow code (an activation running past 5 s fails its
 * workflow task). The workflows are the service's own (workflows/: no user code runs in them; definitions are
 * interpreted by activities, in Postgres), their loops bounded and tested. Started without this preload, a
 * process runs the SDK's default. The main thread, and every `vm` call there, is left as it is.
 */
import vm from 'node:vm';
import { isMainThread } from 'node:worker_threads';

/** On the wrapper, so a test (and an operator's debugger) can tell the preload ran in a thread. */
const TIMEOUT_DROPPED = Symbol.for('workflow-alterations.vm-timeout-dropped');

if (!isMainThread) {
  const original = vm.Script.prototype.runInContext;
  if (!original[TIMEOUT_DROPPED]) {
    const runInContext = function (context, options) {
      if (options?.timeout === undefined) return original.call(this, context, options);
      const { timeout: _dropped, ...rest } = options;
      return original.call(this, context, rest);
    };
    runInContext[TIMEOUT_DROPPED] = true;
    vm.Script.prototype.runInContext = runInContext;
  }
}
