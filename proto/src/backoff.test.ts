import { seededRandom as seeded } from '@tamp/scripts/fixtures/seeded-random';
import { describe, expect, it } from 'vitest';
import { EQUAL_JITTER, exponentialDelayMs, jitteredDelayMs } from './backoff';

describe('jitteredDelayMs', () => {
  it('keeps equal jitter within [d/2, d]: half the delay is kept, half drawn', () => {
    expect(EQUAL_JITTER).toEqual({ low: 0.5, high: 1 });
    expect(jitteredDelayMs(2_000, () => 0)).toBe(1_000);
    expect(jitteredDelayMs(2_000, () => 0.5)).toBe(1_500);
    expect(jitteredDelayMs(2_000, () => 0.999_999)).toBe(2_000);
    const random = seeded(1);
    const delays = Array.from({ length: 10_000 }, () => jitteredDelayMs(8_000, random));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(4_000);
    expect(Math.max(...delays)).toBeLessThanOrEqual(8_000);
    expect(delays.every(Number.isInteger)).toBe(true);
  });

  it('is not constant: the draws spread over the band', () => {
    const random = seeded(7);
    const delays = Array.from({ length: 1_000 }, () => jitteredDelayMs(10_000, random));
    expect(new Set(delays).size).toBeGreaterThan(500);
    // Every tenth of the band gets some of them.
    const tenths = new Set(delays.map((delay) => Math.min(9, Math.floor((delay - 5_000) / 500))));
    expect([...tenths].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // And with Math.random too (the runtime's source): a thousand draws are not all one value.
    expect(
      new Set(Array.from({ length: 1_000 }, () => jitteredDelayMs(10_000, Math.random))).size,
    ).toBeGreaterThan(1);
  });

  it('is deterministic with an injected random source', () => {
    const first = Array.from(
      { length: 20 },
      (
        (random) => () =>
          jitteredDelayMs(5_000, random)
      )(seeded(42)),
    );
    const again = Array.from(
      { length: 20 },
      (
        (random) => () =>
          jitteredDelayMs(5_000, random)
      )(seeded(42)),
    );
    expect(again).toEqual(first);
    expect(jitteredDelayMs(5_000, () => 0.25)).toBe(jitteredDelayMs(5_000, () => 0.25));
  });

  it('takes other bands, e.g. ±10 % around the nominal delay', () => {
    const band = { low: 0.9, high: 1.1 };
    expect(jitteredDelayMs(10_000, () => 0, band)).toBe(9_000);
    expect(jitteredDelayMs(10_000, () => 0.5, band)).toBe(10_000);
    expect(jitteredDelayMs(10_000, () => 0.999_999, band)).toBe(11_000);
  });

  it('stays in the band whatever the random source returns', () => {
    for (const wild of [-3, 7, Number.NaN, Number.POSITIVE_INFINITY, 1]) {
      const delay = jitteredDelayMs(1_000, () => wild);
      expect(delay, String(wild)).toBeGreaterThanOrEqual(500);
      expect(delay, String(wild)).toBeLessThanOrEqual(1_000);
    }
    expect(jitteredDelayMs(0, () => 0.5)).toBe(0);
  });
});

describe('exponentialDelayMs', () => {
  it('doubles from the first delay per retry, up to the cap', () => {
    expect([0, 1, 2, 3, 4, 5].map((retry) => exponentialDelayMs(500, retry, 5_000))).toEqual([
      500, 1_000, 2_000, 4_000, 5_000, 5_000,
    ]);
    expect(exponentialDelayMs(250, 2000, 60_000)).toBe(60_000);
    expect(exponentialDelayMs(250, -1)).toBe(250);
  });
});
