import { existsSync } from 'node:fs';
import type { InfrastructureEndpoints } from '@tamp/scripts/infra/launcher';

/** Pinned images for the containers path; the same servers the local path runs. */
const IMAGES = {
  nats: 'nats:2.15-alpine',
  mongo: 'mongo:7.0',
  minio: 'minio/minio:RELEASE.2025-09-07T16-13-09Z',
} as const;

/**
 * `TEST_INFRA=local|containers` decides; otherwise containers when a Docker engine answers.
 * This machine has none, so the default here is local processes.
 */
export async function chooseInfrastructureMode(): Promise<'local' | 'containers'> {
  const requested = process.env.TEST_INFRA;
  if (requested === 'local' || requested === 'containers') return requested;
  if (process.env.DOCKER_HOST === undefined && !existsSync('/var/run/docker.sock')) return 'local';
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return 'containers';
  } catch {
    return 'local';
  }
}

export async function startContainers(): Promise<{
  endpoints: InfrastructureEndpoints;
  stop: () => Promise<void>;
}> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const accessKey = 'tamp-test';
  const secretKey = 'tamp-test-secret';
  const [nats, mongo, minio] = await Promise.all([
    new GenericContainer(IMAGES.nats)
      .withCommand(['-js'])
      .withExposedPorts(4222)
      .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
      .start(),
    new GenericContainer(IMAGES.mongo)
      .withExposedPorts(27017)
      .withWaitStrategy(Wait.forLogMessage(/Waiting for connections/))
      .start(),
    new GenericContainer(IMAGES.minio)
      .withCommand(['server', '/data'])
      .withEnvironment({
        MINIO_ROOT_USER: accessKey,
        MINIO_ROOT_PASSWORD: secretKey,
        MINIO_UPDATE: 'off',
        MINIO_CALLHOME_ENABLE: 'off',
      })
      .withExposedPorts(9000)
      .withWaitStrategy(Wait.forHttp('/minio/health/ready', 9000))
      .start(),
  ]);
  return {
    endpoints: {
      natsUrl: `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`,
      mongoUrl: `mongodb://${mongo.getHost()}:${mongo.getMappedPort(27017)}/`,
      s3: {
        endpoint: `http://${minio.getHost()}:${minio.getMappedPort(9000)}`,
        accessKey,
        secretKey,
        region: 'us-east-1',
      },
    },
    stop: async () => {
      await Promise.all([nats.stop(), mongo.stop(), minio.stop()]);
    },
  };
}
