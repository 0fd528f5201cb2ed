import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startContainerEngine } from '@tamp/scripts/infra/container-engine';
import { buildDependencyImages } from '@tamp/scripts/infra/images/build-images';
import type { InfrastructureEndpoints } from '@tamp/scripts/infra/launcher';
import type { StartedTestContainer } from 'testcontainers';
import { startDependencies } from '../../testcontainers/src/dependencies';
import { createPlacement } from '../../testcontainers/src/placement';

/** `TEST_INFRA=containers` runs the shared servers as containers; otherwise local processes. */
export async function chooseInfrastructureMode(): Promise<'local' | 'containers'> {
  return process.env.TEST_INFRA === 'containers' ? 'containers' : 'local';
}

/**
 * The shared servers as containers of the images built here, the chart's dependency images
 * (`tamp.local/nats`, `tamp.local/ferretdb`, `tamp.local/minio`; scripts/infra/images), started
 * by @tamp/testcontainers' own code on the podman engine (scripts/infra/container-engine.ts),
 * each listening on a loopback port: the same servers the local path runs, FerretDB on its
 * SQLite backend as k8s/dependencies runs it.
 */
export async function startContainers(): Promise<{
  endpoints: InfrastructureEndpoints;
  stop: () => Promise<void>;
}> {
  const built = await buildDependencyImages();
  const image = (prefix: string) => {
    const found = built.find((candidate) => candidate.name.startsWith(`tamp.local/${prefix}:`));
    if (found === undefined) throw new Error(`no ${prefix} image was built`);
    return found.name;
  };
  const dataDir = await mkdtemp(join(tmpdir(), 'tamp-test-engine-'));
  const engine = await startContainerEngine({ dataDir }).catch(async (error: Error) => {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  // testcontainers in this process (the test runner's) finds the engine in its environment.
  Object.assign(process.env, engine.env);
  const started: StartedTestContainer[] = [];
  const stop = async () => {
    await Promise.allSettled(started.map((container) => container.stop({ timeout: 0 })));
    await engine.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const servers = await startDependencies(
      await createPlacement('host'),
      { nats: image('nats'), ferretdb: image('ferretdb'), minio: image('minio') },
      async (_name, container) => {
        const running = await container.withStartupTimeout(120_000).start();
        started.push(running);
        return running;
      },
    );
    const { endpoint, accessKey, secretKey } = servers.s3;
    return {
      endpoints: {
        natsUrl: servers.natsUrl,
        mongoUrl: servers.mongoUrl,
        s3: { endpoint, accessKey, secretKey, region: 'us-east-1' },
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
