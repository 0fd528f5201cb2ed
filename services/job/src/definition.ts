import { jobOutcomeMetrics, observeQueueBacklog, type ServiceDefinition } from '@tamp/kit';
import { JOB_INDEXES } from './adapters/job-repository';
import { configSchema, jobSettingsFrom } from './config';
import { startJobService } from './service';

/** The job service as a process runs it: its config, its connections, then its start. */
export const jobService: ServiceDefinition<typeof configSchema> = {
  name: 'job',
  configSchema,
  async start({
    config,
    logger,
    metrics,
    connectNats,
    connectMongo,
    connectMongoForReads,
    openObjectStore,
  }) {
    const { nats, topology, rpc } = await connectNats(config);
    const service = await startJobService({
      db: await connectMongo(config, JOB_INDEXES),
      readDb: await connectMongoForReads(config),
      nats,
      topology,
      rpc,
      store: await openObjectStore(config),
      logger,
      settings: jobSettingsFrom(config),
      metrics: jobOutcomeMetrics(metrics),
    });
    // The job service owns the queue, so it alone exports every consumer's backlog.
    observeQueueBacklog(metrics, nats, Object.values(topology.consumers));
    return service;
  },
};
