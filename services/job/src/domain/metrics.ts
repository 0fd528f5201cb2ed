import { compressionRatio, type JobMetrics } from '@tamp/proto';

/**
 * The worker's metrics with the ratio computed again by proto's one rule, so every stored job
 * follows it whatever the worker that reported (an older version, a bug) sent.
 */
export function normalizeMetrics(metrics: JobMetrics): JobMetrics {
  return { ...metrics, compressionRatio: compressionRatio(metrics.inputSize, metrics.outputSize) };
}
