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
