import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  connectNats,
  type NatsConnection,
  ObjectStore,
  type PipelineWorkerDependencies,
  provisionTopology,
  Rpc,
} from '@tamp/kit';
import { createTopology, type JobWorkMessage, type Topology } from '@tamp/proto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll } from 'vitest';
import { isolatedInfrastructure } from './infrastructure';
import { type DoubleJob, JobServiceDouble } from './job-service-double';

export interface WorkerHarness {
  topology: Topology;
  nats: NatsConnection;
  store: ObjectStore;
  jobService: JobServiceDouble;
  /** Scratch folder of the test; the worker's temp dir is `<dir>/work`. */
  dir: string;
  /** Registers the job with the job service double, then publishes it on `jobs.<pipeline>`. */
  publish(message: JobWorkMessage): Promise<void>;
  /** The job once the double holds it completed or failed. */
  settled(jobId: string): Promise<DoubleJob>;
  close(): Promise<void>;
}

export interface WorkerHarnessOptions {
  name: string;
  concurrency: number;
  /**
   * Starts the worker. `env` is what its process would get here (this file's servers,
   * `concurrency`, a scratch temp dir): parse it with the service's schema for its settings.
   */
  start(
    dependencies: PipelineWorkerDependencies & { env: Record<string, string> },
  ): Promise<{ stop(): Promise<void> }>;
}

/**
 * A worker service started in process against this test file's private slice of the real
 * servers, with the job service played by an in-memory double over real NATS.
 */
export async function startWorkerHarness(options: WorkerHarnessOptions): Promise<WorkerHarness> {
  const infrastructure = isolatedInfrastructure();
  const topology = createTopology(infrastructure.namespace);
  const logger = pino({ level: 'silent' });
  const nats = await connectNats({ url: infrastructure.natsUrl, name: options.name, logger });
  await provisionTopology(nats, topology, 1);
  const store = new ObjectStore({ ...infrastructure.s3, bucket: infrastructure.bucket });
  await store.provision([]);
  const jobService = new JobServiceDouble(nats, topology, 100);
  const dir = await mkdtemp(join(tmpdir(), `tamp-${options.name}-`));
  const worker = await options.start({
    env: {
      ...infrastructure.serviceEnv,
      WORKER_CONCURRENCY: String(options.concurrency),
      WORKER_INLINE_CONCURRENCY: String(options.concurrency),
      WORKER_TEMP_DIR: join(dir, 'work'),
      WORKER_STOP_GRACE_MS: '5000',
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
    async publish(message) {
      jobService.create(message);
      await jetstream(nats).publish(
        topology.subjects.jobs[message.pipeline],
        JSON.stringify(message),
        { msgID: message.jobId },
      );
    },
    settled(jobId) {
      return jobService.until(() => {
        const job = jobService.jobs.get(jobId);
        return (job?.status === 'completed' || job?.status === 'failed') && job;
      });
    },
    async close() {
      await worker.stop();
      await jobService.close();
      const manager = await jetstreamManager(nats);
      for (const stream of Object.values(topology.streams))
        await manager.streams.delete(stream.name);
      await nats.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A work message for a file uploaded at `key` (a fresh job id, created now). */
export function uploadWork(
  work: Pick<JobWorkMessage, 'accountId' | 'pipeline' | 'operations'> & {
    key: string;
    filename: string;
    contentType: string;
  },
): JobWorkMessage {
  const { key, filename, contentType, ...job } = work;
  return {
    ...job,
    jobId: `job_${randomUUID()}`,
    createdAt: new Date().toISOString(),
    input: { kind: 'upload', uploadId: 'upl_test', key, size: 1, contentType, filename },
  } as JobWorkMessage;
}

/**
 * The harness of a test file: started before its tests, closed after them. Read it inside
 * tests (`worker.harness`), once beforeAll has run.
 */
export function useWorkerHarness(options: WorkerHarnessOptions): {
  readonly harness: WorkerHarness;
} {
  let harness: WorkerHarness | undefined;
  beforeAll(async () => {
    harness = await startWorkerHarness(options);
  });
  afterAll(async () => {
    await harness?.close();
  });
  return {
    get harness() {
      if (!harness) throw new Error('the worker harness is not started yet');
      return harness;
    },
  };
}
