import { creditCost, MB } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { daysFrom, usageReport, utcDayOf } from './usage-report';

const period = {
  start: new Date('2025-01-30T06:00:00Z'),
  end: new Date('2025-03-01T06:00:00Z'),
};
const noRows = { totals: [], creditsPerPipeline: [], jobsPerDay: [], creditsPerDay: [] };

describe('the usage report', () => {
  it('dates in UTC and counts days inclusively, across a month end', () => {
    expect(utcDayOf(new Date('2025-01-31T23:59:59.999+00:00'))).toBe('2025-01-31');
    expect(utcDayOf(new Date('2025-02-01T00:30:00+01:00'))).toBe('2025-01-31');
    expect(daysFrom('2025-01-30', '2025-02-02')).toEqual([
      '2025-01-30',
      '2025-01-31',
      '2025-02-01',
      '2025-02-02',
    ]);
    expect(daysFrom('2025-02-02', '2025-02-02')).toEqual(['2025-02-02']);
  });

  it('lists every pipeline and every day up to today, zeros included', () => {
    const report = usageReport({
      ...noRows,
      period,
      now: new Date('2025-02-01T10:00:00Z'),
      unpriced: [],
    });
    expect(report.period).toEqual({
      start: '2025-01-30T06:00:00.000Z',
      end: '2025-03-01T06:00:00.000Z',
    });
    expect(report.pipelines.map((row) => [row.pipeline, row.jobs, row.credits])).toEqual([
      ['audio', 0, 0],
      ['image', 0, 0],
      ['text', 0, 0],
    ]);
    expect(report.days).toEqual([
      { day: '2025-01-30', jobs: 0, credits: 0 },
      { day: '2025-01-31', jobs: 0, credits: 0 },
      { day: '2025-02-01', jobs: 0, credits: 0 },
    ]);
  });

  it('prices records older than the credits field one by one, and dates them', () => {
    const report = usageReport({
      period,
      now: new Date('2025-01-31T10:00:00Z'),
      totals: [
        {
          pipeline: 'image',
          requests: 3,
          inputBytes: 5 * MB,
          audioSeconds: 0,
          megapixels: 0.1 + 0.2,
          characters: 0,
        },
      ],
      creditsPerPipeline: [{ key: 'image', total: 2 }],
      jobsPerDay: [{ key: '2025-01-31', total: 1 }],
      creditsPerDay: [{ key: '2025-01-31', total: 2 }],
      unpriced: [
        { pipeline: 'image', inputBytes: 2 * MB + 1, completedAt: new Date('2025-01-30T07:00Z') },
        { pipeline: 'image', inputBytes: 1, completedAt: new Date('2025-01-31T07:00Z') },
      ],
    });
    // Per job, rounded up: 2 + 1, not the cost of their sum (2).
    expect(creditCost('image', 2 * MB + 1) + creditCost('image', 1)).toBe(3);
    expect(creditCost('image', 2 * MB + 2)).toBe(2);
    expect(report.pipelines[1]).toEqual({
      pipeline: 'image',
      jobs: 3,
      inputBytes: 5 * MB,
      audioSeconds: 0,
      megapixels: 0.3,
      characters: 0,
      credits: 2 + 3,
    });
    expect(report.days).toEqual([
      { day: '2025-01-30', jobs: 1, credits: 2 },
      { day: '2025-01-31', jobs: 2, credits: 3 },
    ]);
  });
});
