import { runService } from '@tamp/kit';
import { WEBHOOK_INDEXES } from './adapters/delivery-repository';
import { configSchema, targetPolicyFrom } from './config';
import { startWebhookService } from './service';

await runService({
  name: 'webhook',
  configSchema,
  async start({ config, logger, metrics, connectNats, connectMongo }) {
    const { nats, topology, rpc } = await connectNats(config);
    return startWebhookService({
      nats,
      topology,
      rpc,
      db: await connectMongo(config, WEBHOOK_INDEXES),
      policy: targetPolicyFrom(config),
      retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE_MS,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      logger,
      metrics,
    });
  },
});
