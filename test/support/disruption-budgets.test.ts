import { describe, expect, it } from 'vitest';
import { BudgetWatch } from './disruption-budgets';

describe('BudgetWatch', () => {
  it('counts a budget left short of healthy pods as breached', () => {
    const watch = new BudgetWatch();
    watch.observe('tamp/job', { currentHealthy: 2, desiredHealthy: 1, expectedPods: 2 });
    watch.observe('tamp/job', { currentHealthy: 1, desiredHealthy: 1, expectedPods: 2 });
    watch.observe('tamp/job', { currentHealthy: 0, desiredHealthy: 1, expectedPods: 2 });
    expect(watch.breaches).toEqual(['tamp/job: 0 < 1 of 2']);
  });

  it('does not count the pods of a scale-up that are still starting', () => {
    const watch = new BudgetWatch();
    watch.observe('tamp/worker-audio', { currentHealthy: 1, desiredHealthy: 0, expectedPods: 1 });
    watch.observe('tamp/worker-audio', { currentHealthy: 1, desiredHealthy: 2, expectedPods: 3 });
    watch.observe('tamp/worker-audio', { currentHealthy: 2, desiredHealthy: 2, expectedPods: 3 });
    expect(watch.breaches).toEqual([]);
  });

  it('still counts healthy pods lost during a scale-up beyond what the budget allows', () => {
    const watch = new BudgetWatch();
    watch.observe('tamp/worker-audio', { currentHealthy: 2, desiredHealthy: 1, expectedPods: 2 });
    // Scaled to 3 (one starting), and one of the two healthy pods taken.
    watch.observe('tamp/worker-audio', { currentHealthy: 1, desiredHealthy: 2, expectedPods: 3 });
    expect(watch.breaches).toEqual([]);
    watch.observe('tamp/worker-audio', { currentHealthy: 0, desiredHealthy: 2, expectedPods: 3 });
    expect(watch.breaches).toEqual(['tamp/worker-audio: 0 < 2 of 3']);
  });
});
