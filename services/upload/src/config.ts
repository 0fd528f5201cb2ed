import { mongoEnv, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...mongoEnv,
  ...s3Env,
  /** How often uploads older than the 2-day retention are deleted with their objects. */
  UPLOAD_SWEEP_INTERVAL_MS: z.coerce
    .number()
    .int()
    .positive()
    // Hourly: uploads live 2 days, so an hour late is nothing.
    .default(60 * 60 * 1000),
});
export type Config = z.output<typeof configSchema>;

export interface UploadSettings {
  /** How often the sweeper deletes uploads past their retention. */
  sweepIntervalMs: number;
}

export function uploadSettingsFrom(config: Config): UploadSettings {
  return { sweepIntervalMs: config.UPLOAD_SWEEP_INTERVAL_MS };
}
