import { runService } from '@tamp/kit';
import { WEBHOOK_INDEXES } from './adapters/delivery-store';
import { configSchema, targetPolicyFrom } from './config';
import { startWebhookService } from './service';

await runService({
  name: 'webhook',
  configSchema,
  async start(context) {
    const { config } = context;
    const { nats, topology, rpc } = await context.connectNats(
      config.NATS_URL,
      config.NATS_NAMESPACE,
    );
    const db = await context.connectMongo(config.MONGO_URL, config.MONGO_DATABASE, WEBHOOK_INDEXES);
    const service = await startWebhookService({
      nats,
      topology,
      rpc,
      db,
      policy: targetPolicyFrom(config),
      retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE_MS,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      logger: context.logger,
      metrics: context.metrics,
    });
    // Registered after NATS and Mongo, so it runs before they close.
    context.shutdown.register('webhook', () => service.stop());
  },
});
