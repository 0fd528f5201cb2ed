import type { ServiceDefinition } from '@tamp/kit';
import { WEBHOOK_INDEXES } from './adapters/delivery-repository';
import { configSchema, webhookSettingsFrom } from './config';
import { startWebhookService } from './service';

/** The webhook service as a process runs it: its config, its connections, then its start. */
export const webhookService: ServiceDefinition<typeof configSchema> = {
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
};
