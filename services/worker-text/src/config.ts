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
});
export type Config = z.output<typeof configSchema>;
