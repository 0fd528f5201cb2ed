import { hostname } from 'node:os';
import { INLINE_PIPELINES, type Pipeline, type Topology, WORKER_SERVICES } from '@tamp/proto';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { z } from 'zod';
import type { NatsEnv, S3Env, ServiceEnv } from '../config';
import type { NatsConnection } from '../nats';
import type { ObjectStore } from '../object-store';
import type { Rpc } from '../rpc';
import type { RunningService, ServiceDefinition } from '../service';
import type { JobWorkerEnv, JobWorkerSettings } from './config';
import { serveInlineWork } from './inline';
import { FETCH_EXPIRES_MS, startJobWorker } from './job-worker';
import { hostResourceGate, type ResourceGate } from './resource-gate';
import { PermanentJobError, type ProcessJob, type WorkOf } from './types';

/** What a worker service gets besides its settings: its connections, logger and metrics. */
export interface PipelineWorkerDependencies {
  nats: NatsConnection;
  topology: Topology;
  rpc: Rpc;
  store: ObjectStore;
  logger: Logger;
  metrics: Registry;
}

/**
 * Runs one pipeline's work with one `processJob`: queued jobs from its JOBS consumer and, for
 * image and text, inline requests on `work.<pipeline>.inline`.
 */
export async function startPipelineWorker<P extends Pipeline>(
  dependencies: PipelineWorkerDependencies & {
    settings: JobWorkerSettings;
    pipeline: P;
    /** Gets only this pipeline's work: another pipeline's job fails for good before it. */
    processJob: ProcessJob<P>;
    /** The pipeline's own limit on top of the host's (see startJobWorker). */
    resourceGate?: ResourceGate;
  },
): Promise<RunningService> {
  const { settings, pipeline } = dependencies;
  const host = hostResourceGate();
  const own = dependencies.resourceGate;
  const resourceGate: ResourceGate = {
    blockedBy: () => own?.blockedBy() ?? host.blockedBy(),
  };
  const service = WORKER_SERVICES[pipeline];
  const shared = {
    processJob: onlyPipeline(pipeline, dependencies.processJob),
    logger: dependencies.logger,
    metrics: dependencies.metrics,
    tempDir: settings.tempDir,
  };
  const inline = INLINE_PIPELINES.has(pipeline)
    ? serveInlineWork({
        ...shared,
        rpc: dependencies.rpc,
        subject: dependencies.topology.subjects.inline[pipeline as 'image' | 'text'],
        queue: service,
        concurrency: settings.inlineConcurrency,
        resourceGate,
      })
    : undefined;
  const queued = await startJobWorker({
    ...shared,
    rpc: dependencies.rpc,
    nats: dependencies.nats,
    topology: dependencies.topology,
    consumer: service,
    workerName: `${service}/${hostname()}/${process.pid}`,
    concurrency: settings.concurrency,
    fetchExpiresMs: FETCH_EXPIRES_MS,
    resourceGate,
  });
  return {
    async stop() {
      await Promise.all([queued.stop({ graceMs: settings.stopGraceMs }), inline?.stop()]);
    },
  };
}

function onlyPipeline<P extends Pipeline>(pipeline: P, processJob: ProcessJob<P>): ProcessJob {
  return async (work, context) => {
    if (work.pipeline !== pipeline) {
      throw new PermanentJobError(`The ${pipeline} worker cannot run a ${work.pipeline} job`);
    }
    return processJob(work as WorkOf<P>, context);
  };
}

type WorkerServiceEnv = ServiceEnv & NatsEnv & S3Env & JobWorkerEnv;

/** The whole definition of a worker service: connect, open storage, start with its settings. */
export function pipelineWorkerService<
  Schema extends z.ZodType<WorkerServiceEnv, unknown>,
  Settings,
>(options: {
  pipeline: Pipeline;
  configSchema: Schema;
  /** The service's `<service>SettingsFrom` (its config.ts). */
  settingsFrom(config: z.output<Schema>): Settings;
  start(dependencies: PipelineWorkerDependencies & { settings: Settings }): Promise<RunningService>;
}): ServiceDefinition<Schema> {
  return {
    name: WORKER_SERVICES[options.pipeline],
    configSchema: options.configSchema,
    async start({ config, logger, metrics, connectNats, openObjectStore }) {
      const { nats, topology, rpc } = await connectNats(config);
      return options.start({
        settings: options.settingsFrom(config),
        nats,
        topology,
        rpc,
        store: await openObjectStore(config),
        logger,
        metrics,
      });
    },
  };
}
