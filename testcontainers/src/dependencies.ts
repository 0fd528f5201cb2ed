import { randomBytes } from 'node:crypto';
import { GenericContainer, type StartedTestContainer } from 'testcontainers';
import type { TampImages } from './images.js';
import type { Placement } from './placement.js';

/** Starts one container of the installation (labelled, logged, timed by the caller). */
export type Run = (name: string, container: GenericContainer) => Promise<StartedTestContainer>;

/** The three servers, where Tamp's containers reach them, and their containers. */
export type StartedDependencies = Awaited<ReturnType<typeof startDependencies>>;

/** NATS, FerretDB (SQLite) and MinIO, as k8s/dependencies runs them, started together. */
export async function startDependencies(
  placement: Placement,
  images: Pick<TampImages, 'nats' | 'minio' | 'ferretdb'>,
  run: Run,
) {
  const ports = {
    nats: await placement.port(4222),
    natsMonitor: await placement.port(8222),
    ferretdb: await placement.port(27017),
    ferretdbDebug: await placement.port(8088),
    minio: await placement.port(9000),
  };
  const listen = placement.listenHost;
  const s3 = { accessKey: `tamp-${secret(6)}`, secretKey: secret(24) };
  // Data on tmpfs, writable whichever user the image runs as (the official images run as root,
  // the ones `npm run images` builds as 10001).
  const scratch = (...paths: string[]) =>
    Object.fromEntries(paths.map((path) => [path, 'rw,mode=1777']));
  const [nats, ferretdb, minio] = await allStarted([
    run(
      'nats',
      placement
        .place(new GenericContainer(images.nats), 'nats', [ports.nats, ports.natsMonitor])
        .withEntrypoint(['nats-server'])
        .withCommand([
          ...['--jetstream', '--store_dir', '/data', '--server_name', 'tamp'],
          ...['--addr', listen, '--port', String(ports.nats)],
          ...['--http_port', String(ports.natsMonitor)],
        ])
        .withTmpFs(scratch('/data'))
        .withWaitStrategy(
          placement.waitForHttp('/healthz?js-enabled-only=true', ports.natsMonitor),
        ),
    ),
    run(
      'ferretdb',
      placement
        .place(new GenericContainer(images.ferretdb), 'ferretdb', [
          ports.ferretdb,
          ports.ferretdbDebug,
        ])
        .withEntrypoint(['/ferretdb'])
        .withCommand([
          '--handler=sqlite',
          '--sqlite-url=file:/state/',
          '--state-dir=/state',
          `--listen-addr=${listen}:${ports.ferretdb}`,
          `--debug-addr=${listen}:${ports.ferretdbDebug}`,
          '--telemetry=disable',
          '--log-level=warn',
        ])
        .withTmpFs(scratch('/state'))
        .withWaitStrategy(placement.waitForHttp('/debug/readyz', ports.ferretdbDebug)),
    ),
    run(
      'minio',
      placement
        .place(new GenericContainer(images.minio), 'minio', [ports.minio])
        .withEntrypoint(['minio'])
        .withCommand(['server', '/data', '--address', `${listen}:${ports.minio}`, '--quiet'])
        .withEnvironment({
          MINIO_ROOT_USER: s3.accessKey,
          MINIO_ROOT_PASSWORD: s3.secretKey,
          // No update checks, no call-home, no console: nothing leaves the network.
          MINIO_UPDATE: 'off',
          MINIO_CALLHOME_ENABLE: 'off',
          MINIO_BROWSER: 'off',
          HOME: '/tmp',
        })
        .withTmpFs(scratch('/data', '/tmp'))
        .withWaitStrategy(placement.waitForHttp('/minio/health/ready', ports.minio)),
    ),
  ]);
  return {
    nats,
    ferretdb,
    minio,
    ports,
    natsUrl: `nats://${placement.address('nats', ports.nats)}`,
    mongoUrl: `mongodb://${placement.address('ferretdb', ports.ferretdb)}/`,
    s3: { ...s3, endpoint: `http://${placement.address('minio', ports.minio)}` },
  };
}

/** A random secret of `bytes` bytes, in hex. */
export function secret(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

/**
 * Waits for every start, then fails with the first failure: a container still starting when
 * another failed is started and recorded, so the clean-up that follows removes it too.
 */
export async function allStarted<T extends readonly unknown[]>(
  starts: {
    [K in keyof T]: Promise<T[K]>;
  },
): Promise<T> {
  const results = await Promise.allSettled(starts);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
