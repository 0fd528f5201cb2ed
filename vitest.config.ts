import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'proto/**/*.test.ts',
      'client/**/*.test.ts',
      'services/**/*.test.ts',
      'scripts/**/*.test.ts',
      'test/**/*.test.ts',
    ],
    // Real NATS, MongoDB-wire and S3 servers, started once per run (see test/setup).
    globalSetup: ['test/setup/global-infra.ts'],
    // Native modules (sharp, libvips) are not safe to load in worker threads; forks isolate them.
    pool: 'forks',
    reporters: ['default', './test/setup/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
  },
});
