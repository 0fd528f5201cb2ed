import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { TOOLS_BIN } from './scripts/infra/provision';

/**
 * Five projects, named for what a test needs (docs/testing.md):
 * - unit: code alone, no server, no tool and no global setup; `npm run test:unit` runs it in
 *   seconds on a fresh clone.
 * - integration: one service or library against real NATS, MongoDB-wire and S3 servers, and the
 *   adapters that drive real ffmpeg, sharp, pdf.js and worker pools (tools the setup installs).
 * - e2e: the whole system as its users meet it (HTTP API, SDK and CLI, Chromium, load and faults).
 * - cluster: the Helm chart, images and a real Kubernetes control plane and node.
 * - containers: Tamp's images run by a container engine through testcontainers
 *   (@tamp/testcontainers), with the engine and images of its own setup
 *   (test/setup/container-engine.ts).
 * The three before it share one set of servers, started once per run
 * (test/setup/global-infra.ts). `npm test` runs all five.
 */
const WITH_SERVERS = ['test/setup/global-infra.ts'];
// The pinned tools before the machine's own, for the tests' own runs of them: ffmpeg and ffprobe
// are static builds (scripts/infra/tools.json, `wheels`) that the audio worker runs too.
process.env.PATH = `${TOOLS_BIN}:${process.env.PATH ?? ''}`;
/** Adapters meet the outside world (ffmpeg, sharp, pdf.js, worker threads): not unit tests. */
const ADAPTER_TESTS = 'services/*/src/adapters/**/*.test.ts';

export default defineConfig({
  resolve: {
    // Tests import the module by its name, from its sources (its package ships dist/).
    alias: {
      '@tamp/testcontainers': fileURLToPath(
        new URL('./testcontainers/src/index.ts', import.meta.url),
      ),
    },
  },
  test: {
    // Native modules (sharp, libvips) are not safe to load in worker threads; forks isolate them.
    pool: 'forks',
    reporters: ['default', './test/setup/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          // No native module is loaded here (adapters are excluded): threads start faster than forks.
          pool: 'threads',
          include: [
            'proto/**/*.test.ts',
            'services/*/src/**/*.test.ts',
            'services/*/examples/**/*.test.ts',
            'client/test/unit/**/*.test.ts',
            'testcontainers/test/unit/**/*.test.ts',
            'scripts/docs/**/*.test.ts',
            'test/support/**/*.test.ts',
          ],
          exclude: [ADAPTER_TESTS, '**/node_modules/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['services/*/test/**/*.test.ts', ADAPTER_TESTS, 'scripts/**/*.test.ts'],
          exclude: ['scripts/docs/**', '**/node_modules/**'],
          globalSetup: WITH_SERVERS,
          // After e2e and containers: the operator's tests run a control plane.
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: [
            'test/e2e/**/*.test.ts',
            'test/browser/**/*.test.ts',
            'test/stack/**/*.test.ts',
            'test/load/**/*.test.ts',
            'client/test/*.test.ts',
          ],
          globalSetup: WITH_SERVERS,
        },
      },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: ['test/deploy/**/*.test.ts', 'test/kubernetes/**/*.test.ts'],
          // Starts the Kubernetes binaries' build with the run (the operator's tests wait for it).
          globalSetup: [...WITH_SERVERS, 'test/setup/kubernetes-builds.ts'],
          sequence: { groupOrder: 2 },
        },
      },
      {
        extends: true,
        test: {
          name: 'containers',
          include: [
            'test/containers/**/*.test.ts',
            'testcontainers/test/*.test.ts',
            'testcontainers/examples/**/*.test.ts',
          ],
          globalSetup: ['test/setup/container-engine.ts'],
          setupFiles: ['test/setup/container-environment.ts'],
        },
      },
    ],
  },
});
