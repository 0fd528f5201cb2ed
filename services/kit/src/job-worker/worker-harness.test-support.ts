import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { createTopology, type Topology } from '@tamp/proto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { isolatedInfrastructure } from '../../../../test/support/infrastructure';
import { connectNats, type NatsConnection, provisionTopology } from '../nats';
import { ObjectStore } from '../object-store';
import { Rpc } from '../rpc';
import { JobServiceDouble } from './job-service-double.test-support';
import type { PipelineWorkerDependencies } from './pipeline-worker';

export interface WorkerHarness {
  topology: Topology;
  nats: NatsConnection;
  store: ObjectStore;
  jobService: JobServiceDouble;
  /** Scratch folder of the test; the worker's temp dir is `<dir>/work`. */
  dir: string;
  close(): Promise<void>;
}

/**
 * A worker service started in process against this test file's private slice of the real
 * servers, with the job service played by an in-memory double over real NATS.
 */
export async function startWorkerHarness(options: {
  name: string;
  concurrency: number;
  start(dependencies: PipelineWorkerDependencies): Promise<{ stop(): Promise<void> }>;
}): Promise<WorkerHarness> {
  const infrastructure = isolatedInfrastructure();
  const topology = createTopology(infrastructure.namespace);
  const logger = pino({ level: 'silent' });
  const nats = await connectNats({ url: infrastructure.natsUrl, name: options.name, logger });
  await provisionTopology(nats, topology);
  const store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });
  await store.provision([]);
  const jobService = new JobServiceDouble(nats, topology, 100);
  const dir = await mkdtemp(join(tmpdir(), `tamp-${options.name}-`));
  const worker = await options.start({
    config: {
      WORKER_CONCURRENCY: options.concurrency,
      WORKER_INLINE_CONCURRENCY: options.concurrency,
      WORKER_TEMP_DIR: join(dir, 'work'),
      WORKER_STOP_GRACE_MS: 5_000,
    },
    nats,
    topology,
    rpc: new Rpc(nats, topology, logger),
    store,
    logger,
    metrics: new Registry(),
  });
  return {
    topology,
    nats,
    store,
    jobService,
    dir,
    async close() {
      await worker.stop();
      await jobService.close();
      const manager = await jetstreamManager(nats);
      for (const stream of Object.values(topology.streams))
        await manager.streams.delete(stream.name);
      await nats.close();
    },
  };
}
