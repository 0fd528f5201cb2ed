import { exponentialDelayMs, type JitterBand, jitteredDelayMs } from '@tamp/proto';
import { TampApiError } from './errors';

export interface RetryPolicy {
  /** Retries after the first attempt. */
  maxRetries: number;
  /** First backoff delay; it doubles with each retry, with full jitter. */
  baseDelayMs: number;
  /** Longest backoff delay. */
  maxDelayMs: number;
  /**
   * Longest `Retry-After` that is waited for. A rate-limit window is a minute, so the default
   * covers any 429; an answer asking for longer fails at once instead of stalling the caller.
   */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxRetries: 5,
  baseDelayMs: 500,
  maxDelayMs: 20_000,
  maxRetryAfterMs: 65_000,
};

/**
 * Full jitter: a backoff delay is drawn anywhere between nothing and its nominal value. The
 * services wait with equal jitter (at least half; docs/decisions.md#retries), but an SDK's
 * callers are many independent clients, whose retries full jitter spreads the most.
 */
const FULL_JITTER: JitterBand = Object.freeze({ low: 0, high: 1 });

/** Why a request is being sent again. */
export type RetryReason = 'RATE_LIMITED' | 'IDEMPOTENCY_KEY_IN_USE' | 'UNAVAILABLE' | 'network';

/**
 * Whether a failed attempt may be sent again. `repeatable` says whether a second copy of the
 * request can do no harm when the first one was acted on (reads, uploads, and job creations
 * that the server deduplicates by Idempotency-Key):
 * - 429 RATE_LIMITED and 409 IDEMPOTENCY_KEY_IN_USE are refused before any work is done (or
 *   answered with the one job of that key), so they are always retried;
 * - 503 UNAVAILABLE and network failures may come after the work was done, so they are
 *   retried only when the request is repeatable.
 */
export function retryReasonOf(failure: unknown, repeatable: boolean): RetryReason | undefined {
  if (failure instanceof TampApiError) {
    if (failure.code === 'RATE_LIMITED' || failure.code === 'IDEMPOTENCY_KEY_IN_USE') {
      return failure.code;
    }
    return failure.code === 'UNAVAILABLE' && repeatable ? 'UNAVAILABLE' : undefined;
  }
  return isNetworkFailure(failure) && repeatable ? 'network' : undefined;
}

/**
 * fetch rejects with a TypeError when no answer arrived (refused, reset, DNS), and the client's
 * own per-request timeout aborts with a TimeoutError. A caller's abort is not a failure to retry.
 */
export function isNetworkFailure(failure: unknown): boolean {
  if (failure instanceof TypeError) return true;
  return failure instanceof Error && failure.name === 'TimeoutError';
}

/**
 * Milliseconds to wait before retry number `retry` (1-based), or undefined when the server asks
 * for longer than the policy allows. `Retry-After` is a minimum: a little jitter is added so
 * that many workers limited at once do not all come back in the same millisecond. Delays and
 * jitter are @tamp/proto's (backoff.ts), the ones the services use, with the SDK's own bands.
 */
export function retryDelayMs(
  retry: number,
  retryAfterSeconds: number | undefined,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (retryAfterSeconds !== undefined) {
    const asked = retryAfterSeconds * 1000;
    if (asked > policy.maxRetryAfterMs) return undefined;
    // Up to 10 % more than asked, and never more than a second more.
    return jitteredDelayMs(asked, random, { low: 1, high: 1 + Math.min(0.1, 1000 / asked) });
  }
  const nominal = exponentialDelayMs(policy.baseDelayMs, retry - 1, policy.maxDelayMs);
  return jitteredDelayMs(nominal, random, FULL_JITTER);
}

/** `Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110). */
export function parseRetryAfter(
  value: string | null | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - nowMs) / 1000));
}

/** A timer that ends early, with the signal's reason, when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
