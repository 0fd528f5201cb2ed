import { creditMetrics, type ServiceDefinition } from '@tamp/kit';
import { BILLING_INDEXES } from './adapters/documents';
import { billingSettingsFrom, configSchema } from './config';
import { startBillingService } from './service';

/** The billing service as a process runs it: its config, its connections, then its start. */
export const billingService: ServiceDefinition<typeof configSchema> = {
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
};
