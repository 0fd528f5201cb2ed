import { jobOutcomeMetrics, observeQueueBacklog, runService } from '@tamp/kit';
import { JOB_INDEXES } from './adapters/job-repository';
import { configSchema, jobSettingsFrom } from './config';
import { startJobService } from './service';

await runService({
  name: 'job',
  configSchema,
  async start(context) {
    const { config } = context;
    const { nats, topology, rpc } = await context.connectNats(config);
    const service = await startJobService({
      db: await context.connectMongo(config, JOB_INDEXES),
      readDb: await context.connectMongoForReads(config),
      nats,
      topology,
      rpc,
      store: await context.openObjectStore(config),
      logger: context.logger,
      settings: jobSettingsFrom(config),
      metrics: jobOutcomeMetrics(context.metrics),
    });
    // The job service owns the queue, so it alone exports every consumer's backlog.
    observeQueueBacklog(context.metrics, nats, Object.values(topology.consumers));
    return service;
  },
});
