import { runService } from '@tamp/kit';
import { WEBHOOK_INDEXES } from './adapters/delivery-store';
import { configSchema, targetPolicyFrom } from './config';
import { startWebhookService } from './service';

await runService({
  name: 'webhook',
  configSchema,
  async start(context) {
    const { config } = context;
    const { nats, topology, rpc } = await context.connectNats(config);
    return startWebhookService({
      nats,
      topology,
      rpc,
      db: await context.connectMongo(config, WEBHOOK_INDEXES),
      policy: targetPolicyFrom(config),
      retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE_MS,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      logger: context.logger,
      metrics: context.metrics,
    });
  },
});
