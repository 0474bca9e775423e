import { defineConfig } from 'vitest/config';

// The lifecycle test (test/e2e/lifecycle.test.ts) loads the machine on purpose (busy processes on both
// cores while it stops and starts the service): it runs alone, after every other file.
const LIFECYCLE = 'test/e2e/lifecycle.test.ts';
// The time-share test measures another tenant's latencies against floods: it runs alone too, before it.
const TIME_SHARES = 'test/e2e/time-shares.test.ts';

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    // vitest's own report, then one plain closing line with the counts (test/support/summary-reporter.ts).
    reporters: ['default', './test/support/summary-reporter.ts'],
    // Two cores: two test files at a time, each with its own database and task queue.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [LIFECYCLE, TIME_SHARES] } },
      { extends: true, test: { name: 'time-shares', include: [TIME_SHARES], sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'lifecycle', include: [LIFECYCLE], sequence: { groupOrder: 2 } } },
    ],
  },
});
