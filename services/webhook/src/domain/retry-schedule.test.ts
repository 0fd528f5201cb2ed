import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETRY_SCHEDULE_MS,
  honourRetryAfter,
  isRetryAfterStatus,
  nextRetryDelay,
  parseRetryAfterMs,
  parseRetrySchedule,
} from './retry-schedule';

describe('DEFAULT_RETRY_SCHEDULE_MS', () => {
  it('is 15 s, 5 min, 30 min, 2 h, 5 h: five retries, about 7.6 h in all', () => {
    expect(DEFAULT_RETRY_SCHEDULE_MS).toEqual([15_000, 300_000, 1_800_000, 7_200_000, 18_000_000]);
    const totalHours = DEFAULT_RETRY_SCHEDULE_MS.reduce((sum, ms) => sum + ms, 0) / 3_600_000;
    expect(totalHours).toBeCloseTo(7.6, 1);
  });
});

describe('parseRetrySchedule', () => {
  it('reads comma-separated milliseconds, tolerating spaces', () => {
    expect(parseRetrySchedule('100,200, 400 ,800')).toEqual([100, 200, 400, 800]);
    expect(parseRetrySchedule('0')).toEqual([0]);
  });

  it('throws on anything that is not a list of whole milliseconds', () => {
    for (const bad of [
      '',
      ' ',
      '100,,200',
      '100,',
      '1.5',
      '-5',
      '1e3',
      '100ms',
      'abc',
      '99999999999999999999',
    ]) {
      expect(() => parseRetrySchedule(bad), JSON.stringify(bad)).toThrow(TypeError);
    }
  });
});

describe('nextRetryDelay', () => {
  const mid = () => 0.5;

  it('follows the schedule after attempts 1..5 and gives up after the sixth attempt', () => {
    const delays = [1, 2, 3, 4, 5].map((attempt) =>
      nextRetryDelay(attempt, DEFAULT_RETRY_SCHEDULE_MS, mid),
    );
    expect(delays).toEqual([...DEFAULT_RETRY_SCHEDULE_MS]);
    expect(nextRetryDelay(6, DEFAULT_RETRY_SCHEDULE_MS, mid)).toBeNull();
  });

  it('uses the default schedule when none is given', () => {
    expect(nextRetryDelay(1, undefined, mid)).toBe(15_000);
  });

  it('jitters by at most ±10 %', () => {
    expect(nextRetryDelay(1, [10_000], () => 0)).toBe(9_000);
    expect(nextRetryDelay(1, [10_000], () => 0.999_999)).toBe(11_000);
    expect(nextRetryDelay(2, [10_000, 300_000], () => 0.25)).toBe(285_000);
    for (let i = 0; i < 200; i += 1) {
      const delay = nextRetryDelay(1, [15_000]);
      expect(delay).toBeGreaterThanOrEqual(13_500);
      expect(delay).toBeLessThanOrEqual(16_500);
    }
  });

  it('keeps a misbehaving random source inside the band', () => {
    expect(nextRetryDelay(1, [1_000], () => 7)).toBe(1_100);
    expect(nextRetryDelay(1, [1_000], () => -3)).toBe(900);
  });

  it('follows a short configured schedule, as the tests of the whole system use', () => {
    const schedule = parseRetrySchedule('100,200,400');
    expect([1, 2, 3, 4].map((attempt) => nextRetryDelay(attempt, schedule, mid))).toEqual([
      100,
      200,
      400,
      null,
    ]);
  });

  it('rejects attempt numbers below 1 or fractional', () => {
    expect(() => nextRetryDelay(0)).toThrow(RangeError);
    expect(() => nextRetryDelay(1.5)).toThrow(RangeError);
  });
});

describe('Retry-After', () => {
  const now = Date.parse('2025-11-21T12:00:00Z');

  it('applies only to 429 and 503 answers', () => {
    expect(isRetryAfterStatus(429)).toBe(true);
    expect(isRetryAfterStatus(503)).toBe(true);
    for (const status of [200, 301, 400, 404, 500, 502, 504])
      expect(isRetryAfterStatus(status)).toBe(false);
  });

  it('parses delta-seconds and HTTP dates', () => {
    expect(parseRetryAfterMs('120', now)).toBe(120_000);
    expect(parseRetryAfterMs(' 0 ', now)).toBe(0);
    expect(parseRetryAfterMs('Fri, 21 Nov 2025 12:01:30 GMT', now)).toBe(90_000);
    expect(parseRetryAfterMs('Friday, 21-Nov-25 12:01:30 GMT', now)).toBe(90_000);
    // A date already past asks for an immediate retry.
    expect(parseRetryAfterMs('Fri, 21 Nov 2025 11:00:00 GMT', now)).toBe(0);
  });

  it('treats missing or malformed values as absent', () => {
    for (const bad of [
      undefined,
      null,
      '',
      '   ',
      '-5',
      '1.5',
      '12abc',
      'soon',
      'Fri, 21 Nov 2025',
      'Fri, 99 Nov 2025 99:99:99 GMT',
    ]) {
      expect(parseRetryAfterMs(bad, now), JSON.stringify(bad)).toBeNull();
    }
  });

  it('honours a request of up to twice the scheduled delay', () => {
    expect(honourRetryAfter('30', 15_000, now)).toBe(30_000);
    expect(honourRetryAfter('5', 15_000, now)).toBe(5_000);
    expect(honourRetryAfter('0', 15_000, now)).toBe(0);
    expect(honourRetryAfter('Fri, 21 Nov 2025 12:00:20 GMT', 15_000, now)).toBe(20_000);
  });

  it('keeps the schedule when the request is longer than twice the delay or unusable', () => {
    expect(honourRetryAfter('31', 15_000, now)).toBe(15_000);
    expect(honourRetryAfter('86400', 300_000, now)).toBe(300_000);
    expect(honourRetryAfter('Sat, 22 Nov 2025 12:00:00 GMT', 15_000, now)).toBe(15_000);
    expect(honourRetryAfter(undefined, 15_000, now)).toBe(15_000);
    expect(honourRetryAfter('later', 15_000, now)).toBe(15_000);
  });
});
