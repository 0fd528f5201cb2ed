import { tmpdir } from 'node:os';
import { z } from 'zod';
import { natsEnv, s3Env, serviceEnv } from '../config';

/**
 * Environment shared by the three workers (the service's own, NATS, S3 and how it takes work);
 * each passes its own default concurrencies.
 */
export function jobWorkerEnv(defaults: { concurrency: number; inlineConcurrency: number }) {
  return {
    ...serviceEnv,
    ...natsEnv,
    ...s3Env,
    /** Queued jobs processed at once by one worker process. */
    WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(defaults.concurrency),
    /** Inline requests processed at once (image and text workers). */
    WORKER_INLINE_CONCURRENCY: z.coerce
      .number()
      .int()
      .min(1)
      .max(64)
      .default(defaults.inlineConcurrency),
    /**
     * Parent of the per-job scratch directories (give it a volume sized for the inputs); what a
     * killed worker left there is removed by the next worker on it.
     */
    WORKER_TEMP_DIR: z.string().min(1).default(tmpdir()),
    /** On SIGTERM, how long running jobs may finish before they are handed back. */
    WORKER_STOP_GRACE_MS: z.coerce.number().int().nonnegative().default(15_000),
  };
}

export type JobWorkerEnv = z.output<z.ZodObject<ReturnType<typeof jobWorkerEnv>>>;

/** How a worker process takes work, whatever its pipeline (the shared part of its settings). */
export interface JobWorkerSettings {
  /** Queued jobs processed at once. */
  concurrency: number;
  /** Inline requests processed at once (pipelines with an inline route only). */
  inlineConcurrency: number;
  /** Parent of the per-job scratch directories. */
  tempDir: string;
  /** On stop, how long running jobs may finish before they are handed back. */
  stopGraceMs: number;
}

/** The shared part of a worker's settings, for its `<service>SettingsFrom`. */
export function jobWorkerSettingsFrom(config: JobWorkerEnv): JobWorkerSettings {
  return {
    concurrency: config.WORKER_CONCURRENCY,
    inlineConcurrency: config.WORKER_INLINE_CONCURRENCY,
    tempDir: config.WORKER_TEMP_DIR,
    stopGraceMs: config.WORKER_STOP_GRACE_MS,
  };
}
