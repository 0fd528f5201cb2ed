import { type JitterBand, jitteredDelayMs } from '@tamp/proto';

/**
 * Delays before each retry, measured from the previous attempt (docs/decisions.md#webhooks):
 * 15 s, 5 min, 30 min, 2 h, 5 h — about 7.6 h in all, so a receiver down for hours still
 * gets the event.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = Object.freeze([
  15_000, 300_000, 1_800_000, 7_200_000, 18_000_000,
]);

/** Each delay is spread by up to ±10 % so retries of many events do not arrive in lockstep. */
export const RETRY_JITTER_RATIO = 0.1;

/**
 * The documented ±10 % (docs/decisions.md#webhooks) rather than the equal jitter of the other
 * retry loops: the schedule's delays are promises to receivers ("about 15 s, then 5 min, …"),
 * which a band from half the delay would break.
 */
const SCHEDULE_JITTER: JitterBand = Object.freeze({
  low: 1 - RETRY_JITTER_RATIO,
  high: 1 + RETRY_JITTER_RATIO,
});

/** Only these statuses carry a `Retry-After` that the scheduler honours. */
export const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503]);

const DIGITS = /^\d+$/;

/**
 * Parses `WEBHOOK_RETRY_SCHEDULE_MS` ("15000,300000,…"). Throws on anything malformed,
 * because a silently wrong schedule would only show up hours later.
 */
export function parseRetrySchedule(value: string): number[] {
  const parts = value.split(',').map((part) => part.trim());
  if (parts.some((part) => part === '')) {
    throw new TypeError(`retry schedule "${value}" must be comma-separated milliseconds`);
  }
  return parts.map((part) => {
    const delay = DIGITS.test(part) ? Number(part) : Number.NaN;
    if (!Number.isSafeInteger(delay)) {
      throw new TypeError(`retry schedule entry "${part}" is not a whole number of milliseconds`);
    }
    return delay;
  });
}

/**
 * Delay in ms before the next attempt, after attempt number `attemptNumber` (1 = the first
 * delivery) failed; `null` when the schedule is exhausted and the delivery is given up.
 */
export function nextRetryDelay(
  attemptNumber: number,
  schedule: readonly number[] = DEFAULT_RETRY_SCHEDULE_MS,
  random: () => number = Math.random,
): number | null {
  if (!Number.isSafeInteger(attemptNumber) || attemptNumber < 1) {
    throw new RangeError(`attemptNumber must be an integer ≥ 1, got ${attemptNumber}`);
  }
  const base = schedule[attemptNumber - 1];
  if (base === undefined) return null;
  return jitteredDelayMs(base, random, SCHEDULE_JITTER);
}

/** Whether a response with this status may steer the next delay with `Retry-After`. */
export function isRetryAfterStatus(statusCode: number): boolean {
  return RETRY_AFTER_STATUSES.has(statusCode);
}

/**
 * The delay to use given a receiver's `Retry-After` (delta-seconds or HTTP-date). It is
 * honoured only when it asks for no more than twice the scheduled delay, so a receiver cannot
 * park an event far beyond the schedule; otherwise, or when unparseable, the schedule wins.
 * Callers apply it only to 429/503 answers (`isRetryAfterStatus`).
 */
export function honourRetryAfter(
  retryAfterHeader: string | undefined | null,
  scheduledDelayMs: number,
  nowMs: number = Date.now(),
): number {
  const requested = parseRetryAfterMs(retryAfterHeader, nowMs);
  if (requested === null || requested > scheduledDelayMs * 2) return scheduledDelayMs;
  return requested;
}

/** Milliseconds from `nowMs` that a `Retry-After` value asks for; `null` when unparseable. */
export function parseRetryAfterMs(
  retryAfterHeader: string | undefined | null,
  nowMs: number = Date.now(),
): number | null {
  const value = retryAfterHeader?.trim();
  if (!value) return null;
  if (DIGITS.test(value)) {
    const seconds = Number(value);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : null;
  }
  // An HTTP-date always names a weekday and a time; requiring both keeps stray numbers like
  // "1.5" or "-3" (which Date.parse would accept) out.
  if (!/[A-Za-z]{3}/.test(value) || !/\d{2}:\d{2}:\d{2}/.test(value)) return null;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return null;
  // A date in the past asks for an immediate retry.
  return Math.max(0, at - nowMs);
}
