import { runService } from '@tamp/kit';
import { BILLING_INDEXES } from './adapters/documents';
import { configSchema } from './config';
import { startBillingService } from './service';

await runService({
  name: 'billing',
  configSchema,
  async start(context) {
    const { config } = context;
    const { nats, topology } = await context.connectNats(config.NATS_URL, config.NATS_NAMESPACE);
    const db = await context.connectMongo(config.MONGO_URL, config.MONGO_DATABASE, BILLING_INDEXES);
    const billing = await startBillingService({
      nats,
      topology,
      db,
      plans: config.PLANS_JSON,
      logger: context.logger,
      secretsEncryptionKey: config.SECRETS_ENCRYPTION_KEY,
      webhookSecretGraceMs: config.WEBHOOK_SECRET_GRACE_MS,
    });
    // Registered after NATS and Mongo, so it runs before they close: stop taking work first.
    context.shutdown.register('billing', () => billing.stop());
  },
});
