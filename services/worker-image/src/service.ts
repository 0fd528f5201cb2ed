import { hostname } from 'node:os';
import { serveInlineWork, startJobWorker } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { NatsConnection, ObjectStore, Rpc } from '../../kit/src';
import { configureSharp } from './adapters/sharp-runtime';
import type { Config } from './config';
import { createImageJobProcessor } from './job/image-job';

export const SERVICE_NAME = 'worker-image';

export interface ImageWorkerDependencies {
  config: Pick<
    Config,
    | 'WORKER_CONCURRENCY'
    | 'WORKER_INLINE_CONCURRENCY'
    | 'WORKER_TEMP_DIR'
    | 'WORKER_STOP_GRACE_MS'
    | 'IMAGE_MAX_PIXELS'
    | 'SHARP_CACHE_MB'
    | 'SHARP_CONCURRENCY'
  >;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  store: ObjectStore;
  logger: Logger;
  metrics: Registry;
}

/** Queued jobs from JOBS and inline requests on `work.image.inline`, one processJob for both. */
export async function startImageWorker(deps: ImageWorkerDependencies) {
  const { config } = deps;
  const sharpState = configureSharp({
    cacheMemoryMb: config.SHARP_CACHE_MB,
    concurrency: config.SHARP_CONCURRENCY,
  });
  deps.logger.info(sharpState, 'sharp configured');
  if (!sharpState.jemalloc) {
    deps.logger.warn('not running on jemalloc; see recommendedImageWorkerEnv() in the README');
  }
  const processJob = createImageJobProcessor({
    store: deps.store,
    limitInputPixels: config.IMAGE_MAX_PIXELS,
  });
  const inline = serveInlineWork({
    nats: deps.nats,
    subject: deps.topology.subjects.inline.image,
    queue: SERVICE_NAME,
    processJob,
    logger: deps.logger,
    metrics: deps.metrics,
    concurrency: config.WORKER_INLINE_CONCURRENCY,
    tempDir: config.WORKER_TEMP_DIR,
  });
  const queued = await startJobWorker({
    rpc: deps.rpc,
    nats: deps.nats,
    topology: deps.topology,
    consumer: SERVICE_NAME,
    workerName: `${SERVICE_NAME}/${hostname()}/${process.pid}`,
    concurrency: config.WORKER_CONCURRENCY,
    processJob,
    logger: deps.logger,
    metrics: deps.metrics,
    tempDir: config.WORKER_TEMP_DIR,
    stopGraceMs: config.WORKER_STOP_GRACE_MS,
  });
  return {
    async stop() {
      await Promise.all([queued.stop(), inline.stop()]);
    },
  };
}
