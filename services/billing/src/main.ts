import { creditMetrics, runService } from '@tamp/kit';
import { BILLING_INDEXES } from './adapters/documents';
import { configSchema } from './config';
import { startBillingService } from './service';

await runService({
  name: 'billing',
  configSchema,
  async start(context) {
    const { config } = context;
    const { nats, topology } = await context.connectNats(config);
    return startBillingService({
      nats,
      topology,
      db: await context.connectMongo(config, BILLING_INDEXES),
      plans: config.PLANS_JSON,
      logger: context.logger,
      secretsEncryptionKey: config.SECRETS_ENCRYPTION_KEY,
      webhookSecretGraceMs: config.WEBHOOK_SECRET_GRACE_MS,
      metrics: creditMetrics(context.metrics),
    });
  },
});
