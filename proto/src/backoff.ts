/**
 * Retry delays with jitter: the one implementation every retry and backoff loop of the services
 * uses, so that many processes or jobs failing together (a dependency restarting, a deploy, a
 * burst of failing jobs) do not all come back at the same instant and fail together again.
 *
 * Pure: the random source is a parameter (Math.random in the runtime, a fixed or seeded one in
 * tests and in domain code, which must not reach for randomness itself).
 */

/** Uniform numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

/** Where a jittered delay may land, as fractions of the nominal delay: [low × d, high × d]. */
export interface JitterBand {
  readonly low: number;
  readonly high: number;
}

/**
 * Equal jitter: half the nominal delay is kept and the other half drawn at random, so a delay
 * lands in [d/2, d]. Chosen over full jitter ([0, d]), which spreads retries a little more but
 * may retry almost at once: with equal jitter every backoff still waits at least half its
 * nominal delay (a retry never hammers a dependency that just failed, and the delays still grow
 * exponentially), and never longer than the nominal delay, so documented delays (the job
 * backoff's 2 s, 4 s, 8 s) remain the upper bounds they were.
 */
export const EQUAL_JITTER: JitterBand = Object.freeze({ low: 0.5, high: 1 });

/**
 * The nominal delay `delayMs` moved to a random point of `band` (equal jitter by default), in
 * whole milliseconds. A random source that strays outside [0, 1) (or gives NaN) is clamped, so
 * the result always stays within the band.
 */
export function jitteredDelayMs(
  delayMs: number,
  random: RandomSource,
  band: JitterBand = EQUAL_JITTER,
): number {
  const drawn = random();
  const unit = drawn >= 1 ? 1 : drawn > 0 ? drawn : 0;
  return Math.round(delayMs * (band.low + (band.high - band.low) * unit));
}

/**
 * Exponential backoff before jitter: `firstMs` doubled per retry already made (`retry` 0 is the
 * first retry), capped at `maxMs`.
 */
export function exponentialDelayMs(firstMs: number, retry: number, maxMs = Infinity): number {
  return Math.min(maxMs, firstMs * 2 ** Math.max(0, retry));
}
