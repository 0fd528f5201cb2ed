import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type ReconcileResult = 'unchanged' | 'status' | 'scaled' | 'error';
export type ErrorSource = 'reconcile' | 'informer' | 'event';

/** What an operator's dashboard and alerts need; one series per WorkerPool at most. */
export function createOperatorMetrics(registry: Registry) {
  const reconciles = new Counter({
    name: 'tamp_operator_reconciles_total',
    help: 'Reconciles of WorkerPools, by what they did',
    labelNames: ['result'],
    registers: [registry],
  });
  const errors = new Counter({
    name: 'tamp_operator_errors_total',
    help: 'Failed calls, by where they happened',
    labelNames: ['source'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'tamp_operator_reconcile_duration_seconds',
    help: 'Time to reconcile one WorkerPool',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const backlog = new Gauge({
    name: 'tamp_operator_backlog',
    help: 'Pending plus unacknowledged jobs of the WorkerPool consumer (absent while unreadable)',
    labelNames: ['workerpool', 'pipeline'],
    registers: [registry],
  });
  const desired = new Gauge({
    name: 'tamp_operator_desired_replicas',
    help: 'Replicas the operator wants for the WorkerPool Deployment',
    labelNames: ['workerpool', 'pipeline'],
    registers: [registry],
  });
  const leader = new Gauge({
    name: 'tamp_operator_leader',
    help: '1 while this process holds the leader lease and acts, 0 on standby',
    registers: [registry],
  });
  leader.set(0);
  // A pool's series carry its pipeline, which can change: the labels last used, to remove them.
  const series = new Map<string, { workerpool: string; pipeline: string }>();
  const drop = (name: string) => {
    const labels = series.get(name);
    if (labels === undefined) return;
    backlog.remove(labels);
    desired.remove(labels);
    series.delete(name);
  };
  return {
    reconciled(result: ReconcileResult, seconds: number) {
      reconciles.inc({ result });
      duration.observe(seconds);
    },
    failed(source: ErrorSource) {
      errors.inc({ source });
    },
    observed(
      pool: { name: string; pipeline: string },
      values: { backlog?: number; desired?: number },
    ) {
      const labels = { workerpool: pool.name, pipeline: pool.pipeline };
      if (series.get(pool.name)?.pipeline !== pool.pipeline) drop(pool.name);
      series.set(pool.name, labels);
      if (values.backlog === undefined) backlog.remove(labels);
      else backlog.set(labels, values.backlog);
      if (values.desired === undefined) desired.remove(labels);
      else desired.set(labels, values.desired);
    },
    forget(name: string) {
      drop(name);
    },
    leading(isLeader: boolean) {
      leader.set(isLeader ? 1 : 0);
    },
  };
}

export type OperatorMetrics = ReturnType<typeof createOperatorMetrics>;
