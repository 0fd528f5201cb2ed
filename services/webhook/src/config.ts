import {
  mongoEnv,
  natsEnv,
  serviceEnv,
  webhookTargetEnv,
  webhookTargetPolicyFrom,
} from '@tamp/kit';
import type { TargetPolicy } from '@tamp/proto';
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
  /**
   * The longest the scheduler sleeps between two looks at MongoDB. It wakes by itself for new
   * deliveries, its own retries and its own leases, so this bounds only how late it finds what
   * another instance left behind (a retry of an instance that died); an idle instance spends two
   * indexed queries per interval.
   */
  WEBHOOK_POLL_INTERVAL_MS: z.coerce.number().int().positive().default(5_000),
  /** Delivery attempts in flight at once in one instance. */
  WEBHOOK_MAX_CONCURRENT_ATTEMPTS: z.coerce.number().int().min(1).max(1_024).default(16),
});
export type Config = z.output<typeof configSchema>;

/**
 * How long to wait before trying again when a peer (billing, MongoDB) is unavailable. A design
 * constant like billing's redelivery delay, not a variable: it does not change what a
 * deployment delivers, only how soon after an outage; tests shorten it through the settings.
 */
const PEER_UNAVAILABLE_RETRY_MS = 5_000;

export interface WebhookSettings {
  /** Where deliveries may go: the deployment's rule, the one the gateway applies too. */
  targetPolicy: TargetPolicy;
  /** Delays before each retry (its length = the number of retries after the first attempt). */
  retryScheduleMs: readonly number[];
  /** Deadline of one attempt. */
  timeoutMs: number;
  /** The longest the scheduler sleeps between two looks at MongoDB. */
  pollIntervalMs: number;
  /** Attempts in flight at once in this instance. */
  maxConcurrentAttempts: number;
  /** Wait before trying again when a peer (billing, MongoDB) is unavailable. */
  unavailableRetryMs: number;
}

export function webhookSettingsFrom(config: Config): WebhookSettings {
  return {
    targetPolicy: webhookTargetPolicyFrom(config),
    retryScheduleMs: config.WEBHOOK_RETRY_SCHEDULE_MS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    pollIntervalMs: config.WEBHOOK_POLL_INTERVAL_MS,
    maxConcurrentAttempts: config.WEBHOOK_MAX_CONCURRENT_ATTEMPTS,
    unavailableRetryMs: PEER_UNAVAILABLE_RETRY_MS,
  };
}
