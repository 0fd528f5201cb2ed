import { objectStoreConfigFrom, runService } from '@tamp/kit';
import { configSchema } from './config';
import { SERVICE_NAME, startAudioWorker } from './service';

await runService({
  name: SERVICE_NAME,
  configSchema,
  async start(context) {
    const { config } = context;
    const { nats, topology, rpc } = await context.connectNats(
      config.NATS_URL,
      config.NATS_NAMESPACE,
    );
    const store = await context.openObjectStore(objectStoreConfigFrom(config));
    const worker = await startAudioWorker({
      config,
      nats,
      topology,
      rpc,
      store,
      logger: context.logger,
      metrics: context.metrics,
    });
    // Registered after NATS, so it runs before NATS drains: jobs finish or are handed back first.
    context.shutdown.register('jobs', () => worker.stop());
  },
});
