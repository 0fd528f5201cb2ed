import { availableParallelism } from 'node:os';
import { type JobWorkerSettings, jobWorkerEnv, jobWorkerSettingsFrom } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...jobWorkerEnv({ concurrency: 2, inlineConcurrency: 4 }),
  /** Largest stored-text output also returned as outputText (bytes); larger ones stay in S3. */
  TEXT_MAX_OUTPUT_TEXT_BYTES: z.coerce
    .number()
    .int()
    .nonnegative()
    .default(256 * 1024),
  /**
   * Most worker threads running the text pipeline at once. Unset: one per job the worker admits
   * (WORKER_CONCURRENCY + WORKER_INLINE_CONCURRENCY), but no more than the CPUs available:
   * each warm thread holds its own o200k tables (~80 MB), and threads beyond the cores add
   * memory, not throughput. An inline request stuck behind large jobs falls back to the queue.
   */
  TEXT_PIPELINE_THREADS: z.coerce.number().int().min(1).max(128).optional(),
});
export type Config = z.output<typeof configSchema>;

export interface WorkerTextSettings {
  worker: JobWorkerSettings;
  /** Largest stored-text output also returned as outputText, in bytes. */
  maxOutputTextBytes: number;
  /** Worker threads running the text pipeline. */
  pipelineThreads: number;
}

export function workerTextSettingsFrom(config: Config): WorkerTextSettings {
  return {
    worker: jobWorkerSettingsFrom(config),
    maxOutputTextBytes: config.TEXT_MAX_OUTPUT_TEXT_BYTES,
    // Unset, it follows the other variables and the machine, which a schema default cannot.
    pipelineThreads:
      config.TEXT_PIPELINE_THREADS ??
      Math.min(
        availableParallelism(),
        config.WORKER_CONCURRENCY + config.WORKER_INLINE_CONCURRENCY,
      ),
  };
}
