import { envPort, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { z } from 'zod';

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  /** Large inline text is stored in S3 before its job is created. */
  ...s3Env,
  /** Public API. */
  PORT: envPort.default(8080),
  HOST: z.string().default('0.0.0.0'),
  /** Admin API: internal only, never behind the public ingress. */
  ADMIN_PORT: envPort.default(8081),
  ADMIN_HOST: z.string().default('127.0.0.1'),
  /** Bearer token of the admin API; unset → the admin API refuses every request. */
  ADMIN_TOKEN: z.string().min(16).optional(),
  /** How long an API key check is cached; capped at 4 s so revocation lands within 5 s. */
  AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(4_000).default(4_000),
});
export type Config = z.output<typeof configSchema>;
