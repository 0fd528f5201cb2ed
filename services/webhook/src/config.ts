import {
  mongoEnv,
  natsEnv,
  serviceEnv,
  webhookTargetEnv,
  webhookTargetPolicyFrom,
} from '@tamp/kit';
import { z } from 'zod';
import { DEFAULT_RETRY_SCHEDULE_MS, parseRetrySchedule } from './domain/retry-schedule';

const retrySchedule = z
  .string()
  .default(DEFAULT_RETRY_SCHEDULE_MS.join(','))
  .transform((value, context) => {
    try {
      return parseRetrySchedule(value);
    } catch (error) {
      context.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...mongoEnv,
  ...webhookTargetEnv,
  /** Delays before each retry, from the previous attempt; its length is the number of retries. */
  WEBHOOK_RETRY_SCHEDULE_MS: retrySchedule,
  /** Deadline of one attempt (the spec gives receivers 10 s). */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
});
export type Config = z.output<typeof configSchema>;

/** The deployment's target policy, the same rule the gateway applies when a URL is given. */
export const targetPolicyFrom = webhookTargetPolicyFrom;
