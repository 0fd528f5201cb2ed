import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { launchInfrastructure, type RunningInfrastructure } from '../../scripts/infra/launcher';
import { provisionTools } from '../../scripts/infra/provision';
import { chooseInfrastructureMode, startContainers } from './containers';

/**
 * Starts NATS, a MongoDB-wire server and S3 once per test run and hands their endpoints to every
 * test file (`inject('infrastructure')`). Local processes by default; testcontainers where a
 * Docker engine is reachable or TEST_INFRA=containers.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const mode = await chooseInfrastructureMode();
  if (mode === 'containers') {
    const containers = await startContainers();
    project.provide('infrastructure', containers.endpoints);
    project.provide('toolsProvisioned', false);
    return containers.stop;
  }
  await provisionTools('test');
  const dataDir = await mkdtemp(join(tmpdir(), 'tamp-test-'));
  let infrastructure: RunningInfrastructure;
  try {
    infrastructure = await launchInfrastructure({ dataDir });
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  project.provide('infrastructure', {
    natsUrl: infrastructure.natsUrl,
    mongoUrl: infrastructure.mongoUrl,
    s3: infrastructure.s3,
  });
  project.provide('toolsProvisioned', true);
  return async () => {
    await infrastructure.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    infrastructure: import('../../scripts/infra/launcher').InfrastructureEndpoints;
    toolsProvisioned: boolean;
  }
}
