import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchInfrastructure, type RunningInfrastructure } from '@tamp/scripts/infra/launcher';
import { provisionTools } from '@tamp/scripts/infra/provision';
import type { TestProject } from 'vitest/node';
import { chooseInfrastructureMode, startContainers } from './containers';

interface SharedInfrastructure {
  endpoints: import('@tamp/scripts/infra/launcher').InfrastructureEndpoints;
  toolsProvisioned: boolean;
  stop(): Promise<void>;
}

/**
 * Every project that needs servers lists this setup; vitest loads it once per project, so the
 * servers are kept on globalThis (one process runs every global setup) and shared: started by
 * the first project, stopped after the last one's teardown.
 */
const SHARED = Symbol.for('tamp.test.infrastructure');
type Shared = { started: Promise<SharedInfrastructure>; users: number };

/**
 * Starts NATS, a MongoDB-wire server and S3 once per test run and hands their endpoints to every
 * test file (`inject('infrastructure')`). Local processes by default; testcontainers where a
 * Docker engine is reachable or TEST_INFRA=containers.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const holder = globalThis as { [SHARED]?: Shared };
  holder[SHARED] ??= { started: startInfrastructure(), users: 0 };
  const shared = holder[SHARED];
  shared.users += 1;
  const { endpoints, toolsProvisioned, stop } = await shared.started;
  project.provide('infrastructure', endpoints);
  project.provide('toolsProvisioned', toolsProvisioned);
  return async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    delete holder[SHARED];
    await stop();
  };
}

async function startInfrastructure(): Promise<SharedInfrastructure> {
  const mode = await chooseInfrastructureMode();
  if (mode === 'containers') {
    const containers = await startContainers();
    return { endpoints: containers.endpoints, toolsProvisioned: false, stop: containers.stop };
  }
  await provisionTools('test-first');
  const dataDir = await mkdtemp(join(tmpdir(), 'tamp-test-'));
  let infrastructure: RunningInfrastructure;
  try {
    infrastructure = await launchInfrastructure({ dataDir });
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    endpoints: {
      natsUrl: infrastructure.natsUrl,
      mongoUrl: infrastructure.mongoUrl,
      s3: infrastructure.s3,
    },
    toolsProvisioned: true,
    async stop() {
      await infrastructure.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    infrastructure: import('@tamp/scripts/infra/launcher').InfrastructureEndpoints;
    toolsProvisioned: boolean;
  }
}
