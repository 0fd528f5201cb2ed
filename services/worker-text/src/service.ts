import { hostname } from 'node:os';
import { serveInlineWork, startJobWorker } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { NatsConnection, ObjectStore, Rpc } from '../../kit/src';
import type { Config } from './config';
import { createTextJobProcessor } from './job/text-job';

export const SERVICE_NAME = 'worker-text';

export interface TextWorkerDependencies {
  config: Pick<
    Config,
    | 'WORKER_CONCURRENCY'
    | 'WORKER_INLINE_CONCURRENCY'
    | 'WORKER_TEMP_DIR'
    | 'WORKER_STOP_GRACE_MS'
    | 'TEXT_MAX_OUTPUT_TEXT_BYTES'
  >;
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  store: ObjectStore;
  logger: Logger;
  metrics: Registry;
}

/** Queued jobs from JOBS and inline requests on `work.text.inline`, one processJob for both. */
export async function startTextWorker(deps: TextWorkerDependencies) {
  const { config } = deps;
  const processJob = createTextJobProcessor({
    store: deps.store,
    maxOutputTextBytes: config.TEXT_MAX_OUTPUT_TEXT_BYTES,
  });
  const inline = serveInlineWork({
    nats: deps.nats,
    subject: deps.topology.subjects.inline.text,
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
