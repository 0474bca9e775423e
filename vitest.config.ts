import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // vitest's own report, then one plain closing line with the counts (test/support/summary-reporter.ts).
    reporters: ['default', './test/support/summary-reporter.ts'],
    // Two cores: two test files at a time, each with its own database and task queue.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 60_000,
  },
});
