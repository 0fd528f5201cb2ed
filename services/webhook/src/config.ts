import { envFlag, mongoEnv, natsEnv, serviceEnv } from '@tamp/kit';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { DEFAULT_RETRY_SCHEDULE_MS, parseRetrySchedule } from './domain/retry-schedule';
import type { TargetPolicy } from './domain/target-policy';

const cidrList = z
  .string()
  .default('')
  .transform((value, context) => {
    const entries = value
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    for (const entry of entries) {
      try {
        ipaddr.parseCIDR(entry);
      } catch {
        context.addIssue({
          code: 'custom',
          message: `"${entry}" is not a CIDR (e.g. 127.0.0.0/8)`,
        });
      }
    }
    return entries;
  });

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
  /** Plain http targets; the local stack sets it, the production default refuses them. */
  WEBHOOK_ALLOW_HTTP: envFlag,
  /** CIDRs exempt from the private/loopback refusals (cloud metadata stays refused). */
  WEBHOOK_ALLOW_CIDRS: cidrList,
  /** Delays before each retry, from the previous attempt; its length is the number of retries. */
  WEBHOOK_RETRY_SCHEDULE_MS: retrySchedule,
  /** Deadline of one attempt (the spec gives receivers 10 s). */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
});
export type Config = z.output<typeof configSchema>;

/** The deployment's target policy; with nothing set it is PRODUCTION_POLICY (https, public only). */
export function targetPolicyFrom(
  config: Pick<Config, 'WEBHOOK_ALLOW_HTTP' | 'WEBHOOK_ALLOW_CIDRS'>,
): TargetPolicy {
  return Object.freeze({
    allowHttp: config.WEBHOOK_ALLOW_HTTP,
    allowCidrs: Object.freeze([...config.WEBHOOK_ALLOW_CIDRS]),
  });
}
