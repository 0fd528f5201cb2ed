import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createOperatorMetrics } from './metrics';

describe('operator metrics', () => {
  it('keeps one series per pool, dropped when the pool goes or changes pipeline', async () => {
    const registry = new Registry();
    const metrics = createOperatorMetrics(registry);
    metrics.observed({ name: 'a', pipeline: 'audio' }, { backlog: 3, desired: 2 });
    metrics.observed({ name: 'a', pipeline: 'text' }, { backlog: 1, desired: 1 });
    const text = await registry.metrics();
    expect(text).toContain('tamp_operator_backlog{workerpool="a",pipeline="text"} 1');
    expect(text).not.toContain('pipeline="audio"');
    metrics.forget('a');
    expect(await registry.metrics()).not.toContain('workerpool="a"');
  });
});
