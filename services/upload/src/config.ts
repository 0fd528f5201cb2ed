import { mongoEnv, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';
import { DEFAULT_SWEEP_INTERVAL_MS } from './service';

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...mongoEnv,
  ...s3Env,
  /** How often uploads older than the 2-day retention are deleted with their objects. */
  UPLOAD_SWEEP_INTERVAL_MS: z.coerce.number().int().positive().default(DEFAULT_SWEEP_INTERVAL_MS),
});
export type Config = z.output<typeof configSchema>;
