import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NODE_MEMORY_FLAGS, WORKFLOW_VM_PRELOAD } from '../../src/memory.js';

// The service's processes start with NODE_MEMORY_FLAGS and the workflow-thread preload wherever they are
// started from; the benches and the cluster test pass the constants, the scripts and the container files spell
// them out and must not drift.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

function commands() {
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
  return [
    ...['start', 'start:api', 'start:worker'].map((s) => scripts[s]!),
    ...read('Dockerfile')
      .split('\n')
      .filter((l) => l.startsWith('CMD')),
    ...read('docker-compose.yml')
      .split('\n')
      .filter((l) => /command: \["node"/.test(l)),
  ];
}

describe('the node flags of the service', () => {
  it('put the memory flags on every command that starts the service', () => {
    const all = commands();
    expect(all.length).toBeGreaterThanOrEqual(5);
    for (const command of all) for (const flag of NODE_MEMORY_FLAGS) expect(command).toContain(flag);
  });

  it('preload the workflow-thread vm shim on every command, the one its entry point is built with', () => {
    for (const command of commands()) {
      const fromSrc = command.includes('src/main.ts');
      expect(command).toContain(fromSrc ? WORKFLOW_VM_PRELOAD.src : WORKFLOW_VM_PRELOAD.dist);
    }
  });

  // A worker thread of a process started with the preload (as the SDK's workflow threads are): its vm calls go
  // through the shim, which drops their `timeout` (and with it Node's per-call watchdog thread) and runs them;
  // the main thread's are untouched.
  it('drops the vm timeout in worker threads only', () => {
    const probe = `
      import vm from 'node:vm';
      import { Worker } from 'node:worker_threads';
      const mark = Symbol.for('workflow-alterations.vm-timeout-dropped');
      const w = new Worker(new URL('data:text/javascript,' + encodeURIComponent(\`
        import vm from 'node:vm';
        import { parentPort } from 'node:worker_threads';
        const ctx = vm.createContext({ n: 20 });
        parentPort.postMessage({
          shim: vm.Script.prototype.runInContext[Symbol.for('workflow-alterations.vm-timeout-dropped')] === true,
          value: vm.runInContext('n + 1', ctx, { timeout: 5000 }),
          viaScript: new vm.Script('n * 2').runInContext(ctx, { timeout: 5000, displayErrors: true }),
        });\`)));
      w.on('message', (m) => {
        console.log(JSON.stringify({ main: vm.Script.prototype.runInContext[mark] === true, ...m }));
        process.exit(0);
      });`;
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--import', WORKFLOW_VM_PRELOAD.src, '--input-type=module', '-e', probe],
      { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ main: false, shim: true, value: 21, viaScript: 40 });
  });
});
