import { creditCost, PIPELINES, type Pipeline, type UsageReport } from '@tamp/proto';
import type { BillingPeriod } from './billing-period';
import type { PipelineUsageTotals } from './usage-summary';

const DAY_MS = 24 * 60 * 60 * 1000;

/** A completed job's day, as usage records store it (`completedDay`): `YYYY-MM-DD` in UTC. */
export function utcDayOf(instant: Date): string {
  return instant.toISOString().slice(0, 10);
}

/** Every UTC day from `first` to `last`, both included, oldest first. */
export function daysFrom(first: string, last: string): string[] {
  const days: string[] = [];
  const end = Date.parse(`${last}T00:00:00Z`);
  for (let day = Date.parse(`${first}T00:00:00Z`); day <= end; day += DAY_MS) {
    days.push(utcDayOf(new Date(day)));
  }
  return days;
}

/** One measure summed over one pipeline or one day. */
export interface KeyedTotal<Key extends string> {
  key: Key;
  total: number;
}

/**
 * A usage record written before records carried `credits` and `completedDay`: priced and dated
 * here, one by one, since a cost is rounded up per job and cannot be derived from a sum.
 */
export interface UnpricedUsage {
  pipeline: Pipeline;
  inputBytes: number;
  completedAt: Date;
}

const roundTo3 = (value: number) => Math.round(value * 1000) / 1000;

/**
 * The dashboard's usage page: every pipeline (zeros included) and every UTC day from the
 * period's first to `now`'s (zero-filled), from sums read per measure.
 */
export function usageReport(input: {
  period: BillingPeriod;
  now: Date;
  totals: PipelineUsageTotals[];
  creditsPerPipeline: KeyedTotal<Pipeline>[];
  jobsPerDay: KeyedTotal<string>[];
  creditsPerDay: KeyedTotal<string>[];
  unpriced: UnpricedUsage[];
}): UsageReport {
  const credits = sumsByKey(input.creditsPerPipeline);
  const jobsPerDay = sumsByKey(input.jobsPerDay);
  const creditsPerDay = sumsByKey(input.creditsPerDay);
  for (const record of input.unpriced) {
    const cost = creditCost(record.pipeline, record.inputBytes);
    const day = utcDayOf(record.completedAt);
    credits.set(record.pipeline, (credits.get(record.pipeline) ?? 0) + cost);
    jobsPerDay.set(day, (jobsPerDay.get(day) ?? 0) + 1);
    creditsPerDay.set(day, (creditsPerDay.get(day) ?? 0) + cost);
  }
  return {
    period: { start: input.period.start.toISOString(), end: input.period.end.toISOString() },
    pipelines: PIPELINES.map((pipeline) => {
      const totals = input.totals.find((row) => row.pipeline === pipeline);
      return {
        pipeline,
        jobs: totals?.requests ?? 0,
        inputBytes: totals?.inputBytes ?? 0,
        audioSeconds: roundTo3(totals?.audioSeconds ?? 0),
        megapixels: roundTo3(totals?.megapixels ?? 0),
        characters: totals?.characters ?? 0,
        credits: credits.get(pipeline) ?? 0,
      };
    }),
    days: daysFrom(utcDayOf(input.period.start), utcDayOf(input.now)).map((day) => ({
      day,
      jobs: jobsPerDay.get(day) ?? 0,
      credits: creditsPerDay.get(day) ?? 0,
    })),
  };
}

function sumsByKey<Key extends string>(rows: KeyedTotal<Key>[]): Map<Key, number> {
  return new Map(rows.map((row) => [row.key, row.total]));
}
