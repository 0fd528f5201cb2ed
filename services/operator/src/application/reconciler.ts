import { isDeepStrictEqual } from 'node:util';
import type { ObjectCache, V1Deployment } from '@kubernetes/client-node';
import type { Pipeline } from '@tamp/proto';
import type { Logger } from 'pino';
import { type KubernetesApi, observeDeployment } from '../adapters/kubernetes';
import { type BacklogReading, type Plan, type PoolEvent, planReconcile } from '../domain/plan';
import type { WorkerPool, WorkerPoolStatus } from '../domain/worker-pool';
import type { OperatorMetrics, ReconcileResult } from './metrics';

export interface ReconcilerDependencies {
  api: KubernetesApi;
  pools: ObjectCache<WorkerPool>;
  deployments: ObjectCache<V1Deployment>;
  backlog: { read(pipeline: Pipeline): Promise<BacklogReading> };
  /** Checked right before every write: a process that lost the lease never acts. */
  isLeader(): boolean;
  identity: string;
  metrics: OperatorMetrics;
  logger: Logger;
  /**
   * The time plans are made at (stabilization windows, recommendation and condition times); the
   * system clock when absent. Tests pass one to move through a window without waiting it out.
   */
  clock?: () => Date;
}

export interface ReconcileOutcome {
  result: ReconcileResult;
  /** When to look again (the pool's poll interval); undefined for a pool that is gone. */
  requeueAfterMs?: number;
}

/**
 * One WorkerPool: observe (the pool and its Deployment from the informers' caches, the backlog
 * from JetStream), plan (pure, in the domain), act (scale, then status, then events).
 */
export class Reconciler {
  constructor(private readonly deps: ReconcilerDependencies) {}

  async reconcile(name: string): Promise<ReconcileOutcome> {
    const { api, pools, metrics } = this.deps;
    const pool = pools.get(name, api.namespace);
    if (pool === undefined) {
      metrics.forget(name);
      return { result: 'unchanged' };
    }
    const logger = this.deps.logger.child({ workerpool: name });
    const backlog = await this.deps.backlog.read(pool.spec.pipeline);
    const now = this.deps.clock?.() ?? new Date();
    let plan = planReconcile({ pool, deployment: this.cachedDeployment(pool), backlog, now });
    if (plan.scaleTo !== undefined) {
      plan = await this.confirmWithLiveReplicas(pool, backlog, plan, now);
    }
    if (!this.deps.isLeader()) return { result: 'unchanged' };

    let result: ReconcileResult = 'unchanged';
    if (plan.scaleTo !== undefined) {
      await api.scaleDeployment(pool.spec.deployment, plan.scaleTo);
      logger.info(
        { deployment: pool.spec.deployment, replicas: plan.scaleTo, backlog: plan.status.backlog },
        plan.scaleEvent?.note ?? 'scaled',
      );
      result = 'scaled';
    }
    if (!sameStatus(pool.status, plan.status)) {
      await api.patchWorkerPoolStatus(name, plan.status);
      if (result === 'unchanged') result = 'status';
    }
    const events = plan.scaleEvent === undefined ? plan.events : [plan.scaleEvent, ...plan.events];
    await this.record(pool, events, logger);
    metrics.observed(
      { name, pipeline: pool.spec.pipeline },
      { backlog: plan.status.backlog, desired: plan.status.desiredReplicas },
    );
    return { result, requeueAfterMs: pool.spec.pollIntervalSeconds * 1000 };
  }

  private cachedDeployment(pool: WorkerPool) {
    const deployment = this.deps.deployments.get(pool.spec.deployment, this.deps.api.namespace);
    return deployment === undefined ? undefined : observeDeployment(deployment);
  }

  /**
   * The cache may lag behind a scale this process made a moment ago; reading the replica count
   * before changing it keeps a duplicate reconcile from scaling (and announcing it) twice.
   */
  private async confirmWithLiveReplicas(
    pool: WorkerPool,
    backlog: BacklogReading,
    plan: Plan,
    now: Date,
  ): Promise<Plan> {
    const cached = this.cachedDeployment(pool);
    const live = await this.deps.api.readDeploymentReplicas(pool.spec.deployment);
    if (cached === undefined || live === cached.replicas) return plan;
    const deployment = live === undefined ? undefined : { ...cached, replicas: live };
    return planReconcile({ pool, deployment, backlog, now });
  }

  /** Events are for people: one that cannot be written is logged, never retried. */
  private async record(pool: WorkerPool, events: PoolEvent[], logger: Logger): Promise<void> {
    for (const event of events) {
      try {
        await this.deps.api.recordEvent(pool, event, this.deps.identity);
      } catch (error) {
        this.deps.metrics.failed('event');
        logger.warn({ err: error, reason: event.reason }, 'could not record an event');
      }
    }
  }
}

/** Compares as the API server stores it: no undefined fields, any key order. */
function sameStatus(current: WorkerPoolStatus | undefined, next: WorkerPoolStatus): boolean {
  return isDeepStrictEqual(
    JSON.parse(JSON.stringify(current ?? {})),
    JSON.parse(JSON.stringify(next)),
  );
}
