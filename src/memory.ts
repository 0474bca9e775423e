import v8 from 'node:v8';

/**
 * How far V8 lets the old space grow past the live heap before its next full collection, in percent
 * (HEAP_GROWING_PERCENT, default 30; 0 keeps V8's own factor, up to 4x). A plan allocates quickly and
 * briefly (each batch parses, copies and serializes its 1000 instances), and with V8's own factor that
 * garbage piled up to 250 MB of heap over a 60 MB live set at 100,000 instances; at 30% the peak heap
 * stays under 100 MB for a few percent more CPU (bench/README.md). Process-wide; set once at start.
 */
export function tuneHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/**
 * Node flags every process of the service starts with (the npm scripts, the Dockerfile and compose file
 * spell them out; the bench and the cluster test pass these). A small first old-space limit makes V8 run
 * its first full collections at start, so the heap follows HEAP_GROWING_PERCENT from then on: without it
 * the first plan after a start could pile up ~90 MB of garbage before its first full collection (peak RSS
 * 325–333 MB at 100,000 instances in 3 of 9 runs; 259–278 MB in 6 of 6 with it, bench/README.md).
 */
export const NODE_MEMORY_FLAGS = ['--initial-old-space-size=32', '--max-semi-space-size=2'];

/**
 * The preload every process of the service starts with (the npm
 * scripts, the Dockerfile and compose file spell it out; the benches, the cluster test and the spawned-service
 * tests pass these): in the Temporal SDK's workflow threads it drops the per-call watchdog thread of the
 * sandbox's `vm` calls (src/temporal/workflow-vm.mjs says why and what it gives up). Paths from the package root.
 */
export const WORKFLOW_VM_PRELOAD = {
  src: './src/temporal/workflow-vm.mjs',
  dist: './dist/src/temporal/workflow-vm.mjs',
} as const;
