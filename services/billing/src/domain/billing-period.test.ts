import { describe, expect, it } from 'vitest';
import {
  ANCHOR_CLOCK_SKEW_MS,
  billingCycleAnchorProblem,
  billingPeriodAt,
  CYCLE_MS,
} from './billing-period';

const at = (iso: string) => new Date(iso);

describe('billingPeriodAt', () => {
  it('is the UTC calendar month without an anchor, start inclusive and end exclusive', () => {
    expect(billingPeriodAt(at('2025-01-31T23:59:59.999Z'), null)).toEqual({
      start: at('2025-01-01T00:00:00.000Z'),
      end: at('2025-02-01T00:00:00.000Z'),
    });
    expect(billingPeriodAt(at('2025-02-01T00:00:00.000Z'), null).start).toEqual(
      at('2025-02-01T00:00:00.000Z'),
    );
  });

  it('handles leap February and the year end', () => {
    expect(billingPeriodAt(at('2024-02-29T12:00:00Z'), null).end).toEqual(
      at('2024-03-01T00:00:00Z'),
    );
    expect(billingPeriodAt(at('2025-12-31T23:00:00Z'), null)).toEqual({
      start: at('2025-12-01T00:00:00Z'),
      end: at('2026-01-01T00:00:00Z'),
    });
  });

  it('counts 30-day cycles from the anchor, switching exactly at each boundary', () => {
    const anchor = at('2025-01-10T08:00:00Z');
    expect(billingPeriodAt(anchor, anchor)).toEqual({
      start: anchor,
      end: new Date(anchor.getTime() + CYCLE_MS),
    });
    const secondStart = at('2025-02-09T08:00:00Z');
    expect(billingPeriodAt(new Date(secondStart.getTime() - 1), anchor).start).toEqual(anchor);
    expect(billingPeriodAt(secondStart, anchor).start).toEqual(secondStart);
    expect(billingPeriodAt(at('2025-04-01T00:00:00Z'), anchor).start).toEqual(
      at('2025-03-11T08:00:00Z'),
    );
  });

  it('counts backwards before the anchor', () => {
    const anchor = at('2025-01-10T08:00:00Z');
    expect(billingPeriodAt(at('2025-01-10T07:59:59Z'), anchor)).toEqual({
      start: at('2024-12-11T08:00:00Z'),
      end: anchor,
    });
  });
});

describe('billingCycleAnchorProblem', () => {
  const now = at('2025-01-15T12:00:00Z');

  it('accepts any past instant and now, with a minute of clock skew', () => {
    expect(billingCycleAnchorProblem(at('2020-02-29T00:00:00Z'), now)).toBeNull();
    expect(billingCycleAnchorProblem(now, now)).toBeNull();
    expect(
      billingCycleAnchorProblem(new Date(now.getTime() + ANCHOR_CLOCK_SKEW_MS), now),
    ).toBeNull();
  });

  it('refuses the future and invalid dates', () => {
    expect(
      billingCycleAnchorProblem(new Date(now.getTime() + ANCHOR_CLOCK_SKEW_MS + 1), now),
    ).toMatch(/future/);
    expect(billingCycleAnchorProblem(at('2026-01-01T00:00:00Z'), now)).toMatch(/future/);
    expect(billingCycleAnchorProblem(new Date(Number.NaN), now)).toMatch(/ISO-8601/);
  });
});
