import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ContainerEngine, startContainerEngine } from '@tamp/scripts/infra/container-engine';
import {
  type BuiltImage,
  buildDependencyImages,
  buildServiceImages,
  IMAGE_REPOSITORY,
} from '@tamp/scripts/infra/images/build-images';
import { PROJECT_ROOT } from '@tamp/scripts/infra/provision';
import { imagesEnvironment, type TampImages } from '@tamp/testcontainers';
import type { TestProject } from 'vitest/node';

/**
 * The `containers` project's engine: the images `npm run images` builds (built, or found up to
 * date by buildah's layer cache), and podman serving the Docker API over them
 * (scripts/infra/container-engine.ts). Test files reach both through their environment, as a
 * customer's CI would set it: testcontainers reads DOCKER_HOST and
 * TESTCONTAINERS_RYUK_DISABLED, @tamp/testcontainers TAMP_TESTCONTAINERS_NETWORK=host and the
 * TAMP_*_IMAGE names. Stopped after the last file: every container removed, no process, mount
 * or namespace left.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const log = (message: string) => console.log(`[container engine] ${message}`);
  const started = Date.now();
  const images = await localImages(log);
  log(`images ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  const dataDir = await mkdtemp(join(tmpdir(), 'tamp-engine-'));
  let engine: ContainerEngine;
  try {
    engine = await startContainerEngine({ dataDir, log });
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  // Applied in each test file's process by container-environment.ts; the runner's own
  // environment stays as it was (the other projects' setups read DOCKER_HOST).
  project.provide('containerEnvironment', { ...engine.env, ...imagesEnvironment(images) });
  return async () => {
    await engine.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    containerEnvironment: Record<string, string>;
  }
}

/** Every Tamp image and the dependencies', built here; their names for @tamp/testcontainers. */
async function localImages(log: (message: string) => void): Promise<TampImages> {
  const { version: tag } = JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8'));
  const built = [
    ...(await buildDependencyImages({ log })),
    ...(await buildServiceImages({ tag, log })),
  ];
  return {
    repository: IMAGE_REPOSITORY,
    tag,
    nats: named(built, 'tamp.local/nats:'),
    minio: named(built, 'tamp.local/minio:'),
    ferretdb: named(built, 'tamp.local/ferretdb:'),
  };
}

function named(images: readonly BuiltImage[], prefix: string): string {
  const image = images.find((candidate) => candidate.name.startsWith(prefix));
  if (image === undefined) throw new Error(`no image ${prefix}… was built`);
  return image.name;
}
