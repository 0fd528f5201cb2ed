import { type JobWorkerSettings, jobWorkerEnv, jobWorkerSettingsFrom } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...jobWorkerEnv({ concurrency: 2, inlineConcurrency: 2 }),
  /** Pixel budget per image: decoded input (all kept frames) and every resize result. */
  IMAGE_MAX_PIXELS: z.coerce.number().int().positive().default(100_000_000),
  /**
   * Memory in MiB the worker's image jobs may use together, on top of its idle ~100 MiB (see
   * memory-model.ts). Jobs wait for room; a job that cannot fit even alone fails. Size the
   * pod's memory limit as this plus 160 MiB, rounded up to 64 MiB (512 MiB for the default; the
   * Helm chart derives it this way).
   */
  IMAGE_MEMORY_BUDGET_MB: z.coerce.number().int().positive().default(320),
  /** libvips operation cache in MB; 0 (off) suits a worker that never sees an image twice. */
  SHARP_CACHE_MB: z.coerce.number().int().nonnegative().default(0),
  /** libvips threads per image; 0 = one per CPU core. */
  SHARP_CONCURRENCY: z.coerce.number().int().nonnegative().default(0),
});
export type Config = z.output<typeof configSchema>;

export interface WorkerImageSettings {
  worker: JobWorkerSettings;
  /** Pixel budget per image: decoded input (all kept frames) and every resize result. */
  maxPixels: number;
  /** Memory the worker's image jobs may use together, in bytes. */
  memoryBudgetBytes: number;
  /** libvips operation cache in MB; 0: off. */
  sharpCacheMb: number;
  /** libvips threads per image; 0: one per CPU core. */
  sharpConcurrency: number;
}

export function workerImageSettingsFrom(config: Config): WorkerImageSettings {
  return {
    worker: jobWorkerSettingsFrom(config),
    maxPixels: config.IMAGE_MAX_PIXELS,
    memoryBudgetBytes: config.IMAGE_MEMORY_BUDGET_MB * 1024 * 1024,
    sharpCacheMb: config.SHARP_CACHE_MB,
    sharpConcurrency: config.SHARP_CONCURRENCY,
  };
}
