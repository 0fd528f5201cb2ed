import { collectDefaultMetrics, Registry } from 'prom-client';

export type { Registry };

/** One registry per process, labelled with the service name, with Node's default metrics. */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}
