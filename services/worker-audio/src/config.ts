import { jobWorkerEnv, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...s3Env,
  ...jobWorkerEnv({ concurrency: 1 }),
  /** Inputs longer than this fail at once (permanent), before any processing. */
  AUDIO_MAX_DURATION_SEC: z.coerce
    .number()
    .positive()
    .default(4 * 3600),
  /** ffmpeg binary; default: from PATH. */
  FFMPEG_PATH: z.string().min(1).optional(),
  /** ffprobe binary; default: from PATH. */
  FFPROBE_PATH: z.string().min(1).optional(),
});
export type Config = z.output<typeof configSchema>;
