import { runService } from '@tamp/kit';
import { createTopology } from '@tamp/proto';
import { JetStreamBacklog } from './adapters/jetstream-backlog';
import { contextNamespace, KubernetesApi, loadKubeConfig } from './adapters/kubernetes';
import { createOperatorMetrics } from './app/metrics';
import { Operator } from './app/operator';
import { configSchema } from './config';

await runService({
  name: 'operator',
  configSchema,
  async start({ config, logger, metrics: registry, shutdown }) {
    const kubeConfig = loadKubeConfig(config.KUBECONFIG);
    if (kubeConfig === undefined) {
      logger.warn('no Kubernetes API (KUBECONFIG unset, not in a cluster): nothing to scale');
      return;
    }
    const namespace = config.WATCH_NAMESPACE ?? contextNamespace(kubeConfig);
    const backlog = new JetStreamBacklog({
      url: config.NATS_URL,
      topology: createTopology(config.NATS_NAMESPACE),
      timeoutMs: config.REQUEST_TIMEOUT_MS,
      logger,
    });
    const operator = new Operator({
      api: new KubernetesApi(kubeConfig, namespace, config.REQUEST_TIMEOUT_MS),
      backlog,
      election: {
        leaseName: config.LEASE_NAME,
        identity: config.LEASE_IDENTITY,
        leaseDurationSeconds: config.LEASE_DURATION_SECONDS,
        renewDeadlineMs: config.LEASE_RENEW_DEADLINE_MS,
        retryPeriodMs: config.LEASE_RETRY_PERIOD_MS,
      },
      concurrency: config.RECONCILE_CONCURRENCY,
      metrics: createOperatorMetrics(registry),
      logger,
    });
    // NATS being down is reported in each pool's status, not a reason to be unready (nor to
    // wait here); the service is ready once the caches are filled, when start() returns.
    backlog.start();
    shutdown.register('nats', () => backlog.stop());
    shutdown.register('operator', () => operator.stop());
    await operator.start();
    logger.info({ namespace, identity: config.LEASE_IDENTITY }, 'watching WorkerPools');
  },
});
