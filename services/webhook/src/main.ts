// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runService } from '@tamp/kit';
import { WEBHOOK_INDEXES } from './adapters/delivery-repository';
import { configSchema, webhookSettingsFrom } from './config';
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
      settings: webhookSettingsFrom(config),
      logger,
      metrics,
    });
  },
});
