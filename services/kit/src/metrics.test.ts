import { describe, expect, it } from 'vitest';
import {
  createMetricsRegistry,
  creditMetrics,
  jobOutcomeMetrics,
  recordRefund,
  recordReservation,
} from './metrics';

async function samplesOf(registry: ReturnType<typeof createMetricsRegistry>, name: string) {
  const metric = (await registry.getMetricsAsJSON()).find((entry) => entry.name === name);
  return (metric?.values ?? []).map(({ labels, value }) => ({ labels, value }));
}

describe('credit metrics', () => {
  it('count each reservation and refund once: a replayed ledger entry moved nothing', async () => {
    const registry = createMetricsRegistry('billing');
    const credits = creditMetrics(registry);
    recordReservation(credits, 'image', { reserved: 3, replayed: false });
    recordReservation(credits, 'image', { reserved: 3, replayed: true });
    recordReservation(credits, 'audio', { reserved: 10, replayed: false });
    recordRefund(credits, { refunded: 3, replayed: false });
    recordRefund(credits, { refunded: 3, replayed: true });

    expect(await samplesOf(registry, 'tamp_credits_reserved_total')).toEqual([
      { labels: { pipeline: 'image', service: 'billing' }, value: 3 },
      { labels: { pipeline: 'audio', service: 'billing' }, value: 10 },
    ]);
    expect(await samplesOf(registry, 'tamp_credits_refunded_total')).toEqual([
      { labels: { service: 'billing' }, value: 3 },
    ]);
  });
});

describe('job outcome metrics', () => {
  it('count a settled job and observe its duration with the same pipeline, preset and status', async () => {
    const registry = createMetricsRegistry('job');
    const outcomes = jobOutcomeMetrics(registry);
    const createdAt = new Date('2026-01-01T00:00:00Z');
    outcomes.record({
      pipeline: 'audio',
      preset: 'podcast',
      status: 'completed',
      inline: false,
      createdAt,
      finishedAt: new Date(createdAt.getTime() + 7_000),
    });
    outcomes.record({
      pipeline: 'text',
      preset: 'custom',
      status: 'failed',
      inline: true,
      createdAt,
      finishedAt: new Date(createdAt.getTime() + 200),
    });

    const service = 'job';
    expect(await samplesOf(registry, 'tamp_jobs_finished_total')).toEqual([
      {
        labels: {
          pipeline: 'audio',
          preset: 'podcast',
          status: 'completed',
          mode: 'queued',
          service,
        },
        value: 1,
      },
      {
        labels: { pipeline: 'text', preset: 'custom', status: 'failed', mode: 'inline', service },
        value: 1,
      },
    ]);
    const durations = await samplesOf(registry, 'tamp_job_duration_seconds');
    expect(durations.filter((sample) => sample.labels.le === undefined)).toEqual([
      { labels: { pipeline: 'audio', preset: 'podcast', status: 'completed', service }, value: 7 },
      { labels: { pipeline: 'audio', preset: 'podcast', status: 'completed', service }, value: 1 },
      { labels: { pipeline: 'text', preset: 'custom', status: 'failed', service }, value: 0.2 },
      { labels: { pipeline: 'text', preset: 'custom', status: 'failed', service }, value: 1 },
    ]);
  });
});
