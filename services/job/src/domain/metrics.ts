import type { JobMetrics } from '@tamp/proto';

/**
 * `inputSize / outputSize` rounded to 3 decimals (4.2 means 4.2× smaller). An empty output has
 * no finite ratio; it is reported as 0 rather than Infinity, which JSON cannot carry.
 */
export function compressionRatio(inputSize: number, outputSize: number): number {
  if (outputSize <= 0) return 0;
  return Math.round((inputSize / outputSize) * 1000) / 1000;
}

/** The worker's metrics with the ratio recomputed, so every job follows the one definition. */
export function normalizeMetrics(metrics: JobMetrics): JobMetrics {
  return { ...metrics, compressionRatio: compressionRatio(metrics.inputSize, metrics.outputSize) };
}
