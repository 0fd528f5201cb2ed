// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { creditMetrics, runService } from '@tamp/kit';
import { BILLING_INDEXES } from './adapters/documents';
import { billingSettingsFrom, configSchema } from './config';
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
      logger,
      settings: billingSettingsFrom(config),
      metrics: creditMetrics(metrics),
    });
  },
});
