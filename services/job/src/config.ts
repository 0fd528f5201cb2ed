import { mongoEnv, natsEnv, s3Env, serviceEnv } from '@tamp/kit';
import { LIMITS } from '@tamp/proto';
import { z } from 'zod';
import type { JobSettings } from './application/job-settings';

const milliseconds = z.coerce.number().int().nonnegative();

export const configSchema = z.object({
  ...serviceEnv,
  ...natsEnv,
  ...mongoEnv,
  ...s3Env,
  // docs/decisions.md#lifecycle-and-attempts: exponential backoff with a 2 s base.
  /**
   * Retry backoff base: after failed attempt n the retry waits base × 2^(n-1) at most, and at
   * least half of that (equal jitter, so the jobs of one failing burst do not retry together).
   */
  JOB_RETRY_BASE_MS: milliseconds.default(2_000),
  /** How long an inline worker may take before the job is queued instead (spec: 10 s). */
  JOB_INLINE_TIMEOUT_MS: milliseconds.default(LIMITS.inlineReplyTimeoutMs),
  /** How often retention, key expiry and the outbox reconciler run; 0 turns them off. */
  JOB_SWEEP_INTERVAL_MS: milliseconds.default(30_000),
  /** Age after which a queued job's unconfirmed refund or event is redone (a creation's own are redone once past its deadline). */
  JOB_RECONCILE_AFTER_MS: milliseconds.default(30_000),
  /** Time past its deadline after which an unfinished creation's reservation is released. */
  JOB_ABANDON_AFTER_MS: milliseconds.default(60_000),
  /** Age after which an idempotency claim without its job counts as orphaned. */
  JOB_IDEMPOTENCY_STALE_MS: milliseconds.default(30_000),
  // Below the gateway's 5 s service-call timeout, so a waiting twin answers instead of timing out.
  /** How long a concurrent twin of a keyed request waits for the claimed job. */
  JOB_IDEMPOTENCY_WAIT_MS: milliseconds.default(4_000),
  // The default only guards integrity (a forged cursor can only reach the caller's own jobs);
  // set a secret in production anyway, the same on every replica.
  /** HMAC key of list cursors; set the same on every replica. */
  JOB_CURSOR_SECRET: z.string().min(16).default('tamp-job-list-cursor-v1'),
});
export type Config = z.output<typeof configSchema>;

export function jobSettingsFrom(config: Config): JobSettings {
  return {
    retryBaseMs: config.JOB_RETRY_BASE_MS,
    inlineReplyTimeoutMs: config.JOB_INLINE_TIMEOUT_MS,
    sweepIntervalMs: config.JOB_SWEEP_INTERVAL_MS,
    reconcileAfterMs: config.JOB_RECONCILE_AFTER_MS,
    abandonAfterMs: config.JOB_ABANDON_AFTER_MS,
    idempotencyStaleMs: config.JOB_IDEMPOTENCY_STALE_MS,
    idempotencyWaitMs: config.JOB_IDEMPOTENCY_WAIT_MS,
    cursorSecret: config.JOB_CURSOR_SECRET,
  };
}
