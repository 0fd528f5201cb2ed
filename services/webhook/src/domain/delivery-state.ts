import { honourRetryAfter, nextRetryDelay } from './retry-schedule';

/**
 * A delivery sequence's status. `scheduled` waits for `nextAttemptAt`; `delivering` is claimed
 * by one instance until `leaseUntil`; the rest are final until an operator redelivers.
 * `refused`: the target is not allowed by the deployment's policy (or the account is gone);
 * it is recorded and not retried, because the same policy would refuse every retry.
 */
export type DeliveryStatus = 'scheduled' | 'delivering' | 'delivered' | 'exhausted' | 'refused';

/** How one attempt went: 2xx, retryable failure, or a target the policy refuses. */
export type AttemptOutcome = 'delivered' | 'failed' | 'refused';

export interface AttemptVerdict {
  outcome: AttemptOutcome;
  retryAfter?: string | undefined;
}

export type NextStep =
  | { status: 'delivered' | 'exhausted' | 'refused'; nextAttemptAt: null }
  | { status: 'scheduled'; nextAttemptAt: number; delayMs: number };

/**
 * What follows attempt number `attemptNumber` (1 = the first) of a sequence: done, given up, or
 * the time of the next attempt — the schedule's delay with jitter, shortened or stretched by a
 * 429/503 `Retry-After` within the limits of `honourRetryAfter`.
 */
export function nextStep(
  attemptNumber: number,
  verdict: AttemptVerdict,
  schedule: readonly number[],
  nowMs: number,
  random: () => number = Math.random,
): NextStep {
  if (verdict.outcome === 'delivered') return { status: 'delivered', nextAttemptAt: null };
  if (verdict.outcome === 'refused') return { status: 'refused', nextAttemptAt: null };
  const scheduled = nextRetryDelay(attemptNumber, schedule, random);
  if (scheduled === null) return { status: 'exhausted', nextAttemptAt: null };
  const delayMs =
    verdict.retryAfter === undefined
      ? scheduled
      : honourRetryAfter(verdict.retryAfter, scheduled, nowMs);
  return { status: 'scheduled', nextAttemptAt: nowMs + delayMs, delayMs };
}
