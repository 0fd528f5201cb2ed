import {
  jobOutcomeMetrics,
  objectStoreConfigFrom,
  observeQueueBacklog,
  runService,
} from '@tamp/kit';
import { JOB_INDEXES } from './adapters/job-repository';
import { configSchema, jobSettingsFrom } from './config';
import { startJobService } from './service';

await runService({
  name: 'job',
  configSchema,
  async start(context) {
    const { config, logger } = context;
    const { nats, topology, rpc } = await context.connectNats(
      config.NATS_URL,
      config.NATS_NAMESPACE,
    );
    const db = await context.connectMongo(config.MONGO_URL, config.MONGO_DATABASE, JOB_INDEXES);
    const readDb = await context.connectMongoForReads(config.MONGO_URL, config.MONGO_DATABASE);
    const store = await context.openObjectStore(objectStoreConfigFrom(config));
    const service = await startJobService({
      db,
      readDb,
      nats,
      topology,
      rpc,
      store,
      logger,
      settings: jobSettingsFrom(config),
      metrics: jobOutcomeMetrics(context.metrics),
    });
    // The job service owns the queue, so it alone exports every consumer's backlog.
    observeQueueBacklog(context.metrics, nats, Object.values(topology.consumers));
    // Registered after NATS, so it runs before NATS drains: stop taking requests first.
    context.shutdown.register('job-service', () => service.stop());
  },
});
