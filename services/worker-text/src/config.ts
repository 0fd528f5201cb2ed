import { availableParallelism } from 'node:os';
import { jobWorkerEnv, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...s3Env,
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

/** TEXT_PIPELINE_THREADS, or its default from the job concurrencies. */
export function textPipelineThreads(
  config: Pick<
    Config,
    'TEXT_PIPELINE_THREADS' | 'WORKER_CONCURRENCY' | 'WORKER_INLINE_CONCURRENCY'
  >,
): number {
  return (
    config.TEXT_PIPELINE_THREADS ??
    Math.min(availableParallelism(), config.WORKER_CONCURRENCY + config.WORKER_INLINE_CONCURRENCY)
  );
}
