import { runService } from '@tamp/kit';
import { buildAdminApp, buildPublicApp } from './app';
import { configSchema } from './config';

await runService({
  name: 'gateway',
  configSchema,
  async start(context) {
    const { config, logger } = context;
    await context.connectNats(config.NATS_URL, config.NATS_NAMESPACE);

    const publicApp = await buildPublicApp({ logger });
    const adminApp = await buildAdminApp({ logger: logger.child({ api: 'admin' }) });
    await publicApp.listen({ port: config.PORT, host: config.HOST });
    await adminApp.listen({ port: config.ADMIN_PORT, host: config.ADMIN_HOST });
    // Registered after NATS, so HTTP intake stops before the NATS connection drains.
    context.shutdown.register('http', async () => {
      await Promise.all([publicApp.close(), adminApp.close()]);
    });
  },
});
