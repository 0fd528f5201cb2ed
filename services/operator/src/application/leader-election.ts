import { type JitterBand, jitteredDelayMs, type RandomSource } from '@tamp/proto';
import type { Logger } from 'pino';
import type { LeaseStore } from '../adapters/kubernetes';
import { claim, heldByAnother, type LeaseObservation, observe, release } from '../domain/lease';

export interface LeaderElectionOptions {
  identity: string;
  leaseDurationSeconds: number;
  /** A leader that has not renewed for this long stops acting; shorter than the lease. */
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/**
 * A candidate that did not get the lease waits the retry period stretched by up to 20 %
 * (client-go's JitterFactor 1.2), so candidates that found the lease taken together do not all
 * try again together; a leader renews exactly every retry period.
 */
const CANDIDATE_JITTER: JitterBand = Object.freeze({ low: 1, high: 1.2 });

export interface LeadershipCallbacks {
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

/**
 * Leader election on a coordination.k8s.io Lease, as client-go's leaderelection package does
 * it (@kubernetes/client-node 1.x has none): candidates read the Lease every retry period; a
 * free, released or expired lease is claimed with an update guarded by its resourceVersion, so
 * of two candidates exactly one wins; the leader renews every retry period and stops acting as
 * soon as it has failed to renew for the renew deadline, which ends before the lease does, so
 * a new leader never overlaps an old one that still acts. Expiry is judged by this process's
 * own clock from when it saw the record change, never from another node's timestamps. A
 * graceful stop releases the lease (empty holder) so a standby takes over at its next try
 * instead of after the lease duration.
 */
export class LeaderElector {
  private observation: LeaseObservation | undefined;
  private lastRenewedMs: number | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly options: LeaderElectionOptions,
    private readonly callbacks: LeadershipCallbacks,
    private readonly logger: Logger,
    private readonly random: RandomSource = Math.random,
  ) {}

  /** True while this process holds a lease it renewed within the renew deadline. */
  get isLeader(): boolean {
    return (
      this.lastRenewedMs !== undefined &&
      Date.now() - this.lastRenewedMs < this.options.renewDeadlineMs
    );
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; a leader stops acting first, then releases the lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    if (this.lastRenewedMs !== undefined) this.loseLeadership('stopping');
    // Also when the last try won the lease just as the stop began: release checks the holder.
    await this.release();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const acquired = await this.tryAcquireOrRenew();
      if (this.stopped) return;
      if (acquired) {
        const wasLeader = this.lastRenewedMs !== undefined;
        this.lastRenewedMs = Date.now();
        if (!wasLeader) {
          this.logger.info({ identity: this.options.identity }, 'became the leader');
          this.callbacks.onStartedLeading();
        }
      } else if (this.lastRenewedMs !== undefined && !this.isLeader) {
        this.loseLeadership('could not renew the lease within the renew deadline');
      }
      const { retryPeriodMs } = this.options;
      await this.sleep(
        acquired ? retryPeriodMs : jitteredDelayMs(retryPeriodMs, this.random, CANDIDATE_JITTER),
      );
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { identity, leaseDurationSeconds } = this.options;
    try {
      const current = await this.store.read();
      const now = new Date();
      if (current === undefined) {
        await this.store.create(claim(undefined, identity, leaseDurationSeconds, now));
        return true;
      }
      this.observation = observe(this.observation, current.record, Date.now());
      if (heldByAnother(this.observation, identity, Date.now())) return false;
      const claimed = claim(current.record, identity, leaseDurationSeconds, now);
      await this.store.replace(claimed, current.resourceVersion);
      this.observation = { record: claimed, observedAtMs: Date.now() };
      return true;
    } catch (error) {
      // A conflict means another candidate wrote first; anything else is retried the same way.
      this.logger.debug({ err: error }, 'lease not acquired or renewed');
      return false;
    }
  }

  private loseLeadership(why: string): void {
    this.lastRenewedMs = undefined;
    const level = this.stopped ? 'info' : 'warn';
    this.logger[level]({ identity: this.options.identity, why }, 'stopped leading');
    this.callbacks.onStoppedLeading();
  }

  private async release(): Promise<void> {
    try {
      const current = await this.store.read();
      if (current?.record.holderIdentity !== this.options.identity) return;
      await this.store.replace(release(current.record, new Date()), current.resourceVersion);
      this.logger.info('released the leader lease');
    } catch (error) {
      this.logger.warn({ err: error }, 'could not release the lease; it expires by itself');
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
