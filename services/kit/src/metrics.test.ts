import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, creditMetrics, recordRefund, recordReservation } from './metrics';

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
