import { envPort, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { LIMITS } from '@tamp/proto';
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
  /**
   * Budget of one job creation, shared by every internal call made for it; past it the client
   * gets 503 with Retry-After (nothing created or charged) rather than a hang.
   */
  CREATE_JOB_BUDGET_MS: z.coerce
    .number()
    .int()
    .min(5_000)
    .max(120_000)
    .default(LIMITS.createJobBudgetMs),
  /**
   * Job creations one gateway replica forwards at once; more are shed at once with 503 and
   * Retry-After instead of queueing behind work that would miss its budget anyway.
   */
  MAX_CONCURRENT_CREATIONS: z.coerce.number().int().min(1).max(10_000).default(256),
});
export type Config = z.output<typeof configSchema>;
