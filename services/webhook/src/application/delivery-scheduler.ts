import { randomUUID } from 'node:crypto';
import type { Logger } from '@tamp/kit';
import type { DeliveryStore } from '../adapters/delivery-store';
import type { DeliveryAttempt } from './delivery-attempt';

export interface SchedulerSettings {
  /**
   * How often MongoDB is polled for due sequences: retries and leases that expired. A new
   * sequence does not wait for it (the intake wakes the scheduler), so this bounds only how late
   * a retry starts, and what an idle service spends.
   */
  pollIntervalMs: number;
  /** How long a claimed attempt may take before another instance takes it over. */
  leaseMs: number;
  /** Attempts in flight at once in this instance. */
  maxConcurrentAttempts: number;
}

/**
 * Polls `webhook_deliveries` for due sequences, claims each with a lease and runs its attempt,
 * up to `maxConcurrentAttempts` at once; takes over sequences whose instance died mid-attempt
 * (expired leases). Why a poller rather than JetStream's delayed redelivery: README.md.
 */
export class DeliveryScheduler {
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private wakeRequested = false;
  private ticking: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly store: DeliveryStore,
    private readonly attempt: DeliveryAttempt,
    private readonly settings: SchedulerSettings,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.stopped) return;
    this.wakeRequested = false;
    this.ticking = this.tick()
      .catch((error: unknown) => this.logger.error({ err: error }, 'webhook scheduler tick failed'))
      .finally(() => {
        if (this.stopped) return;
        // A wake during the tick may have come after its last query: poll again at once.
        const delay = this.wakeRequested ? 0 : this.settings.pollIntervalMs;
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.start();
        }, delay);
      });
  }

  /** Polls now rather than at the next interval (a sequence was just scheduled). */
  wake(): void {
    if (this.stopped) return;
    if (this.timer === undefined) {
      this.wakeRequested = true; // a tick is running (or none started yet)
      return;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    this.start();
  }

  /** Claims nothing more and waits for the attempts in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    await Promise.allSettled([...this.inFlight]);
  }

  private async tick(): Promise<void> {
    const { store, logger } = this;
    const recovered = await store.recoverExpiredLeases(this.now());
    if (recovered > 0) logger.warn({ recovered }, 'took over webhook attempts whose lease expired');
    while (!this.stopped && this.inFlight.size < this.settings.maxConcurrentAttempts) {
      const claimId = randomUUID();
      const claimedAt = this.now();
      const leaseUntil = new Date(claimedAt.getTime() + this.settings.leaseMs);
      const delivery = await store.claimDue(claimedAt, leaseUntil, claimId);
      if (delivery === null) break;
      const running: Promise<void> = this.attempt
        .run(delivery, claimId)
        .catch((error: unknown) => {
          // The lease brings the sequence back if its state could not be written.
          logger.error({ err: error, deliveryId: delivery._id }, 'webhook attempt crashed');
        })
        .finally(() => this.inFlight.delete(running));
      this.inFlight.add(running);
    }
  }
}
