import type { V1Deployment } from '@kubernetes/client-node';
import { jitteredDelayMs, type Pipeline, type RandomSource } from '@tamp/proto';
import type { Logger } from 'pino';
import type { CachedInformer, KubernetesApi } from '../adapters/kubernetes';
import type { BacklogReading } from '../domain/plan';
import type { WorkerPool } from '../domain/worker-pool';
import { type LeaderElectionOptions, LeaderElector } from './leader-election';
import type { OperatorMetrics } from './metrics';
import { Reconciler } from './reconciler';
import { WorkQueue } from './work-queue';

const INFORMER_RETRY_MS = { first: 1_000, max: 30_000 };

export interface OperatorOptions {
  api: KubernetesApi;
  backlog: { read(pipeline: Pipeline): Promise<BacklogReading> };
  election: LeaderElectionOptions & { leaseName: string };
  concurrency: number;
  metrics: OperatorMetrics;
  logger: Logger;
  /** The reconcilers' clock (see ReconcilerDependencies.clock); the system clock when absent. */
  clock?: () => Date;
  /** Jitter source of every retry delay (proto's backoff.ts); Math.random when absent. */
  random?: RandomSource;
}

/**
 * The control loop. Every replica keeps warm caches of WorkerPools and Deployments (list, then
 * watch: the API server is never polled); only the leader turns changes into reconciles.
 * Reconciles come from changes (a pool's spec, its Deployment) and from each pool's poll
 * interval, when its backlog is read again. They are level-based, so a missed or duplicate
 * notification, a restart or a new leader changes nothing but the timing.
 */
export class Operator {
  private readonly pools: CachedInformer<WorkerPool>;
  private readonly deployments: CachedInformer<V1Deployment>;
  private readonly elector: LeaderElector;
  private readonly reconciler: Reconciler;
  private readonly seenGenerations = new Map<string, number>();
  private queue: WorkQueue | undefined;
  private workers: Promise<void>[] = [];
  private stopping = false;
  private readonly random: RandomSource;

  constructor(private readonly options: OperatorOptions) {
    const { api, election, logger, metrics } = options;
    this.random = options.random ?? Math.random;
    this.pools = api.workerPoolInformer();
    this.deployments = api.deploymentInformer();
    this.elector = new LeaderElector(
      api.leaseStore(election.leaseName),
      election,
      {
        onStartedLeading: () => this.startLeading(),
        onStoppedLeading: () => this.stopLeading(),
      },
      logger,
      this.random,
    );
    this.reconciler = new Reconciler({
      api,
      pools: this.pools,
      deployments: this.deployments,
      backlog: options.backlog,
      isLeader: () => this.elector.isLeader && !this.stopping,
      identity: election.identity,
      metrics,
      logger,
      clock: options.clock,
    });
  }

  /** Resolves once both caches hold a full list; then campaigns for the lease. */
  async start(): Promise<void> {
    this.watchPools();
    this.watchDeployments();
    await Promise.all([
      this.keepRunning('workerpools', this.pools),
      this.keepRunning('deployments', this.deployments),
    ]);
    this.elector.start();
  }

  /** Finishes reconciles under way, then releases the lease, then stops watching. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.stopWorkers();
    await this.elector.stop();
    await Promise.all([this.pools.stop(), this.deployments.stop()]);
  }

  private startLeading(): void {
    if (this.stopping) return;
    this.options.metrics.leading(true);
    const queue = new WorkQueue(this.random);
    this.queue = queue;
    this.workers = Array.from({ length: this.options.concurrency }, () => this.work(queue));
    for (const pool of this.pools.list()) queue.add(pool.metadata.name);
  }

  private stopLeading(): void {
    this.options.metrics.leading(false);
    // A standby's figures would go stale: only the leader reports pools.
    for (const pool of this.pools.list()) this.options.metrics.forget(pool.metadata.name);
    this.queue?.shutDown();
    this.queue = undefined;
  }

  private async stopWorkers(): Promise<void> {
    this.queue?.shutDown();
    await Promise.all(this.workers);
  }

  private async work(queue: WorkQueue): Promise<void> {
    const { metrics, logger } = this.options;
    for (let key = await queue.get(); key !== undefined; key = await queue.get()) {
      const started = performance.now();
      try {
        const outcome = await this.reconciler.reconcile(key);
        queue.forget(key);
        if (outcome.requeueAfterMs !== undefined) queue.addAfter(key, outcome.requeueAfterMs);
        metrics.reconciled(outcome.result, (performance.now() - started) / 1000);
      } catch (error) {
        metrics.reconciled('error', (performance.now() - started) / 1000);
        metrics.failed('reconcile');
        logger.warn({ err: error, workerpool: key }, 'reconcile failed; retrying with backoff');
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
    }
  }

  /**
   * A pool is reconciled when its spec changes (its generation), not when only its status
   * does: the operator's own status writes would otherwise feed back into reconciles.
   */
  private watchPools(): void {
    const changed = (pool: WorkerPool) => {
      const { name, generation } = pool.metadata;
      if (this.seenGenerations.get(name) === generation) return;
      this.seenGenerations.set(name, generation);
      this.queue?.add(name);
    };
    this.pools.on('add', changed);
    this.pools.on('update', changed);
    this.pools.on('delete', (pool) => {
      this.seenGenerations.delete(pool.metadata.name);
      this.queue?.add(pool.metadata.name);
    });
  }

  private watchDeployments(): void {
    const changed = (deployment: V1Deployment) => {
      for (const pool of this.pools.list()) {
        if (pool.spec.deployment === deployment.metadata?.name) this.queue?.add(pool.metadata.name);
      }
    };
    this.deployments.on('change', changed);
  }

  /**
   * client-node's informer stops for good after an error (a failed list, a broken watch):
   * restart it with a growing delay (1 s doubling up to 30 s, with equal jitter so the replicas
   * do not all list again at the same moment after an API server outage), reset once a start
   * succeeds. Resolves at the first successful start, when the cache holds a full list.
   */
  private keepRunning(
    name: string,
    informer: CachedInformer<WorkerPool> | CachedInformer<V1Deployment>,
  ): Promise<void> {
    const { metrics, logger } = this.options;
    let delayMs = INFORMER_RETRY_MS.first;
    return new Promise((synced) => {
      const attempt = async () => {
        if (this.stopping) return synced();
        let failed = false;
        const onError = () => {
          failed = true;
        };
        informer.on('error', onError);
        await informer.start();
        informer.off('error', onError);
        if (!failed) {
          delayMs = INFORMER_RETRY_MS.first;
          synced();
        }
      };
      informer.on('error', (error: unknown) => {
        if (this.stopping) return;
        metrics.failed('informer');
        logger.warn({ err: error, informer: name, delayMs }, 'list or watch failed; restarting');
        setTimeout(() => void attempt(), jitteredDelayMs(delayMs, this.random));
        delayMs = Math.min(delayMs * 2, INFORMER_RETRY_MS.max);
      });
      void attempt();
    });
  }
}
