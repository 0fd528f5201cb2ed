import type { Logger, Registry } from '@tamp/kit';
import { createTopology } from '@tamp/proto';
import { JetStreamBacklog } from './adapters/jetstream-backlog';
import { contextNamespace, KubernetesApi, loadKubeConfig } from './adapters/kubernetes';
import { createOperatorMetrics } from './application/metrics';
import { Operator } from './application/operator';
import type { Config } from './config';

/**
 * The operator from its configuration: the Kubernetes API it watches, the JetStream backlog it
 * reads, leader election and the reconcilers. Null when there is no Kubernetes API to talk to
 * (`npm start` on a laptop): the process then only idles with a warning.
 */
export async function startOperatorService(dependencies: {
  config: Config;
  logger: Logger;
  metrics: Registry;
}): Promise<{ stop(): Promise<void> } | null> {
  const { config, logger } = dependencies;
  const kubeConfig = loadKubeConfig(config.KUBECONFIG);
  if (kubeConfig === undefined) {
    logger.warn('no Kubernetes API (KUBECONFIG unset, not in a cluster): nothing to scale');
    return null;
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
    metrics: createOperatorMetrics(dependencies.metrics),
    logger,
  });
  // NATS being down is reported in each pool's status, not a reason to be unready (nor to
  // wait here); the service is ready once the caches are filled, when start() returns.
  backlog.start();
  await operator.start();
  logger.info({ namespace, identity: config.LEASE_IDENTITY }, 'watching WorkerPools');
  return {
    async stop() {
      await operator.stop();
      await backlog.stop();
    },
  };
}
