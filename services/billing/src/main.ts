import { runService } from '@tamp/kit';
import { configSchema } from './config';

await runService({
  name: 'billing',
  configSchema,
  async start(context) {
    const { config } = context;
    await context.connectNats(config.NATS_URL, config.NATS_NAMESPACE);
    await context.connectMongo(config.MONGO_URL, config.MONGO_DATABASE);
  },
});
