/** What a PodDisruptionBudget's status says at one moment. */
export interface BudgetStatus {
  currentHealthy: number;
  desiredHealthy: number;
  expectedPods: number;
}

/**
 * Breaches of PodDisruptionBudgets across successive samples. A budget short of healthy pods is
 * breached, unless the shortfall is pods its workload was just scaled up by (the operator's
 * WorkerPool adding worker replicas under load): those are not healthy yet, and no eviction
 * took them. Counted from the pods it expected when it last had enough healthy ones.
 */
export class BudgetWatch {
  readonly breaches: string[] = [];
  private readonly expectedWhenSatisfied = new Map<string, number>();

  observe(name: string, status: BudgetStatus): void {
    const { currentHealthy, desiredHealthy, expectedPods } = status;
    if (currentHealthy >= desiredHealthy) {
      this.expectedWhenSatisfied.set(name, expectedPods);
      return;
    }
    const baseline = this.expectedWhenSatisfied.get(name) ?? expectedPods;
    const starting = Math.max(0, expectedPods - baseline);
    if (currentHealthy + starting < desiredHealthy) {
      this.breaches.push(`${name}: ${currentHealthy} < ${desiredHealthy} of ${expectedPods}`);
    }
  }
}
