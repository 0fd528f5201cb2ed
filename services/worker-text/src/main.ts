import { objectStoreConfigFrom, runService } from '@tamp/kit';
import { configSchema } from './config';

await runService({
  name: 'worker-text',
  configSchema,
  async start(context) {
    const { config } = context;
    await context.connectNats(config.NATS_URL, config.NATS_NAMESPACE);
    await context.openObjectStore(objectStoreConfigFrom(config));
  },
});
