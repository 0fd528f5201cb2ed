/**
 * The images a Tamp installation runs: one per service, `<repository>-<service>:<tag>` as the
 * Helm chart names them (`tamp-gateway:0.1.0`), and the three servers Tamp depends on.
 */
export interface TampImages {
  /** `<repository>-<service>:<tag>` per service; the chart's `image.repository`. */
  repository: string;
  tag: string;
  /** NATS with JetStream; run as `nats-server`. */
  nats: string;
  /** MinIO; run as `minio server`. */
  minio: string;
  /** FerretDB 1.x with its SQLite backend; run as `/ferretdb`. */
  ferretdb: string;
}

/**
 * The projects' official images of the dependencies (the versions k8s/dependencies pins) and
 * the service images as `docker/build.sh` tags them. Any image with the same binary at the
 * same path works (the ones `npm run images` builds do).
 */
export const DEFAULT_IMAGES: TampImages = {
  repository: 'tamp',
  tag: '0.1.0',
  nats: 'nats:2.15-alpine',
  minio: 'quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z',
  ferretdb: 'ghcr.io/ferretdb/ferretdb:1.24.2',
};

/**
 * Images named by the environment, for a CI job that builds or mirrors them:
 * TAMP_IMAGE_REPOSITORY, TAMP_IMAGE_TAG, TAMP_NATS_IMAGE, TAMP_MINIO_IMAGE,
 * TAMP_FERRETDB_IMAGE.
 */
export function imagesFromEnvironment(env: NodeJS.ProcessEnv = process.env): Partial<TampImages> {
  const named = {
    repository: env.TAMP_IMAGE_REPOSITORY,
    tag: env.TAMP_IMAGE_TAG,
    nats: env.TAMP_NATS_IMAGE,
    minio: env.TAMP_MINIO_IMAGE,
    ferretdb: env.TAMP_FERRETDB_IMAGE,
  };
  return Object.fromEntries(
    Object.entries(named).filter(([, value]) => value !== undefined && value !== ''),
  );
}

/** The environment variables of `imagesFromEnvironment`, for `images`. */
export function imagesEnvironment(images: TampImages): Record<string, string> {
  return {
    TAMP_IMAGE_REPOSITORY: images.repository,
    TAMP_IMAGE_TAG: images.tag,
    TAMP_NATS_IMAGE: images.nats,
    TAMP_MINIO_IMAGE: images.minio,
    TAMP_FERRETDB_IMAGE: images.ferretdb,
  };
}
