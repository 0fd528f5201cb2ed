// First: tracing must patch libraries before anything loads them (kit/src/instrument.ts).
import '@tamp/kit/instrument';
import { runService } from '@tamp/kit';
import { createTopology } from '@tamp/proto';
import { configSchema, operatorSettingsFrom } from './config';
import { startOperatorService } from './service';

await runService({
  name: 'operator',
  configSchema,
  start: ({ config, logger, metrics }) =>
    startOperatorService({
      settings: operatorSettingsFrom(config),
      natsUrl: config.NATS_URL,
      topology: createTopology(config.NATS_NAMESPACE),
      logger,
      metrics,
    }),
});
