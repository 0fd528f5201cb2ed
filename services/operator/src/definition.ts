import type { ServiceDefinition } from '@tamp/kit';
import { createTopology } from '@tamp/proto';
import { configSchema, operatorSettingsFrom } from './config';
import { startOperatorService } from './service';

/** The operator service as a process runs it: its config, its connections, then its start. */
export const operatorService: ServiceDefinition<typeof configSchema> = {
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
};
