import type { ServiceDefinition } from '@tamp/kit';
import { configSchema, gatewaySettingsFrom } from './config';
import { startGatewayService } from './service';

/** The gateway service as a process runs it: its config, its connections, then its start. */
export const gatewayService: ServiceDefinition<typeof configSchema> = {
  name: 'gateway',
  configSchema,
  async start({ config, logger, metrics, connectNats, openObjectStore }) {
    const { nats, topology, rpc } = await connectNats(config);
    const objectStore = await openObjectStore(config);
    if (config.ADMIN_TOKEN === undefined) {
      logger.warn('ADMIN_TOKEN is not set: the admin API refuses every request');
    }
    const gateway = await startGatewayService({
      logger,
      nats,
      topology,
      rpc,
      objectStore,
      settings: gatewaySettingsFrom(config),
      metrics,
    });
    await gateway.publicApp.listen({ port: config.PORT, host: config.HOST });
    await gateway.adminApp.listen({ port: config.ADMIN_PORT, host: config.ADMIN_HOST });
    return gateway;
  },
};
