import { mongoEnv, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

/** Hourly: uploads live 2 days, so an hour late is nothing. */
export const DEFAULT_SWEEP_INTERVAL_MS = 60 * 60 * 1000;

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...mongoEnv,
  ...s3Env,
  /** How often uploads older than the 2-day retention are deleted with their objects. */
  UPLOAD_SWEEP_INTERVAL_MS: z.coerce.number().int().positive().default(DEFAULT_SWEEP_INTERVAL_MS),
});
export type Config = z.output<typeof configSchema>;
