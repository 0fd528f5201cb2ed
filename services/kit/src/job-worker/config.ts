import { tmpdir } from 'node:os';
import { z } from 'zod';

/** Environment shared by the three workers; each passes its own defaults. */
export function jobWorkerEnv(defaults: { concurrency: number; inlineConcurrency?: number }) {
  return {
    /** Queued jobs processed at once by one worker process. */
    WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(defaults.concurrency),
    /** Inline requests processed at once (image and text workers). */
    WORKER_INLINE_CONCURRENCY: z.coerce
      .number()
      .int()
      .min(1)
      .max(64)
      .default(defaults.inlineConcurrency ?? 4),
    /** Parent of the per-job scratch directories (give it a volume sized for the inputs). */
    WORKER_TEMP_DIR: z.string().min(1).default(tmpdir()),
    /** On SIGTERM, how long running jobs may finish before they are handed back. */
    WORKER_STOP_GRACE_MS: z.coerce.number().int().nonnegative().default(15_000),
  };
}
