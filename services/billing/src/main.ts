import { creditMetrics, runService } from '@tamp/kit';
import { BILLING_INDEXES } from './adapters/documents';
import { configSchema } from './config';
import { startBillingService } from './service';

await runService({
  name: 'billing',
  configSchema,
  async start({ config, logger, metrics, connectNats, connectMongo }) {
    const { nats, topology } = await connectNats(config);
    return startBillingService({
      nats,
      topology,
      db: await connectMongo(config, BILLING_INDEXES),
      plans: config.PLANS_JSON,
      logger,
      secretsEncryptionKey: config.SECRETS_ENCRYPTION_KEY,
      webhookSecretGraceMs: config.WEBHOOK_SECRET_GRACE_MS,
      dashboardSessionTtlMs: config.DASHBOARD_SESSION_TTL_MS,
      signInLinkTtlMs: config.SIGN_IN_LINK_TTL_MS,
      metrics: creditMetrics(metrics),
    });
  },
});
