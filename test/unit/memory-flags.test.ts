import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NODE_MEMORY_FLAGS } from '../../src/memory.js';

// The service's processes start with NODE_MEMORY_FLAGS wherever they are started from; the benches and the
// cluster test pass the constant, the scripts and the container files spell it out and must not drift.
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

describe('the node memory flags', () => {
  it('are on every command that starts the service', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    const commands = [
      ...['start', 'start:api', 'start:worker'].map((s) => scripts[s]!),
      ...read('Dockerfile')
        .split('\n')
        .filter((l) => l.startsWith('CMD')),
      ...read('docker-compose.yml')
        .split('\n')
        .filter((l) => /command: \["node"/.test(l)),
    ];
    expect(commands.length).toBeGreaterThanOrEqual(5);
    for (const command of commands) for (const flag of NODE_MEMORY_FLAGS) expect(command).toContain(flag);
  });
});
