import { describe, expect, it } from 'vitest';
import { nextStep } from './delivery-state';

const schedule = [15_000, 300_000, 1_800_000, 7_200_000, 18_000_000];
const noJitter = () => 0.5;
const now = 1_000_000;

describe('next step after an attempt', () => {
  it('ends the sequence on success and on a refused target', () => {
    expect(nextStep(1, { outcome: 'delivered' }, schedule, now)).toEqual({
      status: 'delivered',
      nextAttemptAt: null,
    });
    expect(nextStep(1, { outcome: 'refused' }, schedule, now)).toEqual({
      status: 'refused',
      nextAttemptAt: null,
    });
  });

  it('follows the schedule for five retries, then gives up', () => {
    const delays = [1, 2, 3, 4, 5].map((attempt) => {
      const step = nextStep(attempt, { outcome: 'failed' }, schedule, now, noJitter);
      return step.status === 'scheduled' ? step.nextAttemptAt - now : null;
    });
    expect(delays).toEqual(schedule);
    expect(nextStep(6, { outcome: 'failed' }, schedule, now, noJitter)).toEqual({
      status: 'exhausted',
      nextAttemptAt: null,
    });
  });

  it('applies ±10 % jitter', () => {
    const low = nextStep(1, { outcome: 'failed' }, schedule, now, () => 0);
    const high = nextStep(1, { outcome: 'failed' }, schedule, now, () => 1);
    expect(low).toMatchObject({ status: 'scheduled', delayMs: 13_500 });
    expect(high).toMatchObject({ status: 'scheduled', delayMs: 16_500 });
  });

  it('honours a Retry-After up to twice the scheduled delay', () => {
    expect(
      nextStep(1, { outcome: 'failed', retryAfter: '25' }, schedule, now, noJitter),
    ).toMatchObject({ delayMs: 25_000, nextAttemptAt: now + 25_000 });
    expect(
      nextStep(1, { outcome: 'failed', retryAfter: '3600' }, schedule, now, noJitter),
    ).toMatchObject({ delayMs: 15_000 });
    // Retry-After never extends the sequence past the last attempt.
    expect(nextStep(6, { outcome: 'failed', retryAfter: '1' }, schedule, now)).toMatchObject({
      status: 'exhausted',
    });
  });
});
