import type { Logger, Registry } from '@tamp/kit';
import type { Topology } from '@tamp/proto';
import { JetStreamBacklog } from './adapters/jetstream-backlog';
import { contextNamespace, KubernetesApi, loadKubeConfig } from './adapters/kubernetes';
import { createOperatorMetrics } from './application/metrics';
import { Operator } from './application/operator';
import type { OperatorSettings } from './config';

/**
 * The operator from its settings: the Kubernetes API it watches, the JetStream backlog it
 * reads, leader election and the reconcilers. Null when there is no Kubernetes API to talk to
 * (`npm start` on a laptop): the process then only idles with a warning.
 */
export async function startOperatorService(dependencies: {
  /** From operatorSettingsFrom (config.ts). */
  settings: OperatorSettings;
  /** The NATS server(s) and namespace whose JOBS backlog the pools scale on. */
  natsUrl: string;
  topology: Topology;
  logger: Logger;
  metrics: Registry;
}): Promise<{ stop(): Promise<void> } | null> {
  const { settings, logger } = dependencies;
  const kubeConfig = loadKubeConfig(settings.kubeconfig, settings.inCluster);
  if (kubeConfig === undefined) {
    logger.warn('no Kubernetes API (KUBECONFIG unset, not in a cluster): nothing to scale');
    return null;
  }
  const namespace = settings.namespace ?? contextNamespace(kubeConfig);
  const backlog = new JetStreamBacklog({
    url: dependencies.natsUrl,
    topology: dependencies.topology,
    timeoutMs: settings.requestTimeoutMs,
    logger,
  });
  const operator = new Operator({
    api: new KubernetesApi(kubeConfig, namespace, settings.requestTimeoutMs),
    backlog,
    election: settings.election,
    concurrency: settings.reconcileConcurrency,
    metrics: createOperatorMetrics(dependencies.metrics),
    logger,
  });
  // NATS being down is reported in each pool's status, not a reason to be unready (nor to
  // wait here); the service is ready once the caches are filled, when start() returns.
  backlog.start();
  await operator.start();
  logger.info({ namespace, identity: settings.election.identity }, 'watching WorkerPools');
  return {
    async stop() {
      await operator.stop();
      await backlog.stop();
    },
  };
}
