import { runService } from '@tamp/kit';
import { configSchema } from './config';

await runService({
  name: 'operator',
  configSchema,
  async start(context) {
    const { config } = context;
    await context.connectNats(config.NATS_URL, config.NATS_NAMESPACE);
  },
});
