import type { Pipeline, PublicUsage } from '@tamp/proto';
import type { BillingPeriod } from './billing-period';

/** One row of the usage aggregation: completed jobs of one pipeline in the period. */
export interface PipelineUsageTotals {
  pipeline: Pipeline;
  requests: number;
  inputBytes: number;
  audioSeconds: number;
  megapixels: number;
  characters: number;
}

const roundTo3 = (value: number) => Math.round(value * 1000) / 1000;

/** The spec's Usage object; minutes and megapixels keep 3 decimals, `video` is always zeros. */
export function usageSummary(period: BillingPeriod, totals: PipelineUsageTotals[]): PublicUsage {
  const of = (pipeline: Pipeline) => totals.find((row) => row.pipeline === pipeline);
  const audio = of('audio');
  const text = of('text');
  const image = of('image');
  return {
    period: { start: period.start.toISOString(), end: period.end.toISOString() },
    audio: {
      requests: audio?.requests ?? 0,
      inputBytes: audio?.inputBytes ?? 0,
      minutes: roundTo3((audio?.audioSeconds ?? 0) / 60),
    },
    text: {
      requests: text?.requests ?? 0,
      inputBytes: text?.inputBytes ?? 0,
      characters: text?.characters ?? 0,
    },
    image: {
      requests: image?.requests ?? 0,
      inputBytes: image?.inputBytes ?? 0,
      megapixels: roundTo3(image?.megapixels ?? 0),
    },
    video: { requests: 0, inputBytes: 0, minutes: 0 },
  };
}
