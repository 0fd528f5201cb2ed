import { describe, expect, it } from 'vitest';
import { ExpiryWalk, expiryHourOf, hourBucketOf } from './expiry-hours';

const HOUR = 60 * 60 * 1000;
const at = (iso: string) => new Date(iso);

describe('hour buckets', () => {
  it('names the UTC hour an instant falls in', () => {
    expect(hourBucketOf(at('2026-11-26T10:59:59.999Z'))).toBe('2026-11-26T10');
    expect(hourBucketOf(at('2026-11-26T11:00:00.000Z'))).toBe('2026-11-26T11');
  });

  it('puts an expiry in the hour its lifetime ends', () => {
    expect(expiryHourOf(at('2026-11-26T10:30:00Z'), 24 * HOUR)).toBe('2026-11-27T10');
  });
});

describe('ExpiryWalk', () => {
  it('looks back once, then visits only the hours still open', () => {
    const walk = new ExpiryWalk(3 * HOUR);
    const now = at('2026-11-26T10:20:00Z');
    expect(walk.due(now)).toEqual([
      '2026-11-26T07',
      '2026-11-26T08',
      '2026-11-26T09',
      '2026-11-26T10',
    ]);
    walk.finishedBefore('2026-11-26T10', now);
    // An hour is closed only once it ended over an hour ago: 09 stays open at 10:20.
    expect(walk.due(now)).toEqual(['2026-11-26T09', '2026-11-26T10']);
    const later = at('2026-11-26T12:05:00Z');
    expect(walk.due(later)).toEqual([
      '2026-11-26T09',
      '2026-11-26T10',
      '2026-11-26T11',
      '2026-11-26T12',
    ]);
  });

  it('keeps an unfinished hour open and never moves back', () => {
    const walk = new ExpiryWalk(2 * HOUR);
    const now = at('2026-11-26T10:00:00Z');
    walk.finishedBefore('2026-11-26T08', now);
    expect(walk.due(now)[0]).toBe('2026-11-26T08');
    walk.finishedBefore('2026-11-26T07', now);
    expect(walk.due(now)[0]).toBe('2026-11-26T08');
  });

  it('visits at most maxBucketsPerPass hours a pass, oldest first, and catches up over the next', () => {
    const walk = new ExpiryWalk(5 * HOUR, 3);
    const now = at('2026-11-26T10:20:00Z');
    expect(walk.due(now)).toEqual(['2026-11-26T05', '2026-11-26T06', '2026-11-26T07']);
    walk.finishedBefore('2026-11-26T07', now);
    expect(walk.due(now)).toEqual(['2026-11-26T07', '2026-11-26T08', '2026-11-26T09']);
    walk.finishedBefore('2026-11-26T09', now);
    expect(walk.due(now)).toEqual(['2026-11-26T09', '2026-11-26T10']);
  });
});
