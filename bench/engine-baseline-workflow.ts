/**
 * The engine bench's baseline (bench/engine.ts): the smallest Temporal workflow with the service's test
 * definition's steps, one workflow per instance. Bundled by its own Worker (bench/engine-baseline-worker.ts)
 * on its own task queue; no code of the service.
 *
 *   local activity "WriteLine" (inserts the instance's row) → wait for the signal `go` → local activity
 *   "SetVariable" (updates the row) → complete.
 */
import { condition, defineSignal, proxyActivities, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import type { BaselineActivities } from './engine-baseline-worker.js';

export const go = defineSignal('go');

const { writeLine, setVariable } = proxyLocalActivities<BaselineActivities>({
  startToCloseTimeout: '1 minute',
});

export async function baselineInstance(instanceId: string): Promise<void> {
  let resumed = false;
  // Set before the first step, so that a signal sent early is never lost.
  setHandler(go, () => {
    resumed = true;
  });
  await writeLine(instanceId);
  await condition(() => resumed);
  await setVariable(instanceId);
}

const { callOut } = proxyActivities<BaselineActivities>({ startToCloseTimeout: '1 minute' });

/**
 * The outbound-call phase's baseline: one regular activity that makes the HTTP call (as the service's Send
 * HTTP Request step makes it from an activity of its own), then the local activity that writes the row.
 */
export async function baselineCall(instanceId: string, url: string): Promise<void> {
  await callOut(url, instanceId);
  await writeLine(instanceId);
}
