import { runService, webhookTargetPolicyFrom } from '@tamp/kit';
import { configSchema, httpLimitsFrom } from './config';
import { startGatewayService } from './service';

await runService({
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
      adminToken: config.ADMIN_TOKEN,
      authCacheTtlMs: config.AUTH_CACHE_TTL_MS,
      createJobBudgetMs: config.CREATE_JOB_BUDGET_MS,
      maxConcurrentCreations: config.MAX_CONCURRENT_CREATIONS,
      metrics,
      httpLimits: httpLimitsFrom(config),
      webhookTargets: webhookTargetPolicyFrom(config),
    });
    await gateway.publicApp.listen({ port: config.PORT, host: config.HOST });
    await gateway.adminApp.listen({ port: config.ADMIN_PORT, host: config.ADMIN_HOST });
    return gateway;
  },
});
