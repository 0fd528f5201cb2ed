import { randomUUID } from 'node:crypto';
import type { Logger } from '@tamp/kit';
import type { DeliveryRepository } from '../adapters/delivery-repository';
import type { DeliveryAttempt } from './delivery-attempt';

/** How many future due times the scheduler remembers (each a retry of one of its attempts). */
const MAX_KNOWN_DUE_TIMES = 10_000;

export interface SchedulerSettings {
  /**
   * The longest the scheduler sleeps between two looks at MongoDB. It wakes sooner for what it
   * knows is due: a new sequence (the intake wakes it), a retry or postponement one of its own
   * attempts scheduled, a lease that may have expired since it started. So this bounds only how
   * late it finds what another instance left behind (a retry of an instance that died), and it
   * is what an idle service spends: two indexed queries per interval.
   */
  pollIntervalMs: number;
  /** How long a claimed attempt may take before another instance takes it over. */
  leaseMs: number;
  /** Attempts in flight at once in this instance. */
  maxConcurrentAttempts: number;
}

/**
 * Claims due sequences from `webhook_deliveries`, each with a lease, and runs their attempts, up
 * to `maxConcurrentAttempts` at once; takes over sequences whose instance died mid-attempt
 * (expired leases). It sleeps until the earliest moment it knows something is due, and at most
 * `pollIntervalMs`, so an idle service costs two queries per interval. Why a poller rather than JetStream's delayed redelivery: README.md.
 */
export class DeliveryScheduler {
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  /** When the pending timer fires (ms since the epoch). */
  private timerAt = Number.POSITIVE_INFINITY;
  /** Future times something is known to be due (own retries, own leases); past ones are dropped. */
  private readonly dueTimes: number[] = [];
  private wakeRequested = false;
  /** The last tick stopped at the concurrency limit: a finished attempt should look again. */
  private saturated = false;
  private ticking: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly deliveries: DeliveryRepository,
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
        // A wake during the tick may have come after its last query: look again at once.
        this.sleepUntil(
          this.wakeRequested ? 0 : this.now().getTime() + this.settings.pollIntervalMs,
        );
      });
  }

  /**
   * Starts the loop, and looks again once every lease taken before this start may have expired
   * (an instance restarted after a crash finds its own interrupted attempts then).
   */
  begin(): void {
    this.start();
    this.wakeAt(new Date(this.now().getTime() + this.settings.leaseMs + 1));
  }

  /** Looks now rather than later (a sequence was just scheduled). */
  wake(): void {
    this.wakeAt(new Date(0));
  }

  /** Looks at `at` at the latest: something is due then. */
  wakeAt(at: Date): void {
    if (this.stopped) return;
    const due = at.getTime();
    if (due > this.now().getTime()) {
      // Beyond the cap, the latest are left to the next look (at most pollIntervalMs late).
      if (this.dueTimes.length < MAX_KNOWN_DUE_TIMES) this.dueTimes.push(due);
      if (this.timer !== undefined && due < this.timerAt) this.sleepUntil(due);
      return;
    }
    if (this.timer === undefined) {
      this.wakeRequested = true; // a tick is running (or none started yet): it looks again
      return;
    }
    this.sleepUntil(0);
  }

  /** Sleeps until `at` or the earliest time something is known to be due, whichever is first. */
  private sleepUntil(at: number): void {
    clearTimeout(this.timer);
    const now = this.now().getTime();
    const later = this.dueTimes.filter((due) => due > now);
    this.dueTimes.splice(0, this.dueTimes.length, ...later);
    const earliest = later.reduce((soonest, due) => Math.min(soonest, due), at);
    this.timerAt = earliest;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        this.start();
      },
      Math.max(0, earliest - now),
    );
  }

  /** Claims nothing more and waits for the attempts in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    await Promise.allSettled([...this.inFlight]);
  }

  private async tick(): Promise<void> {
    const { deliveries, logger } = this;
    const recovered = await deliveries.recoverExpiredLeases(this.now());
    if (recovered > 0) logger.warn({ recovered }, 'took over webhook attempts whose lease expired');
    this.saturated = false;
    while (!this.stopped) {
      if (this.inFlight.size >= this.settings.maxConcurrentAttempts) {
        this.saturated = true;
        break;
      }
      const claimId = randomUUID();
      const claimedAt = this.now();
      const leaseUntil = new Date(claimedAt.getTime() + this.settings.leaseMs);
      const delivery = await deliveries.claimDue(claimedAt, leaseUntil, claimId);
      if (delivery === null) break;
      const running: Promise<void> = this.attempt
        .run(delivery, claimId)
        .then(
          (dueAgain) => {
            if (dueAgain !== null) this.wakeAt(dueAgain);
          },
          (error: unknown) => {
            // The lease brings the sequence back if its state could not be written.
            logger.error({ err: error, deliveryId: delivery._id }, 'webhook attempt crashed');
            this.wakeAt(leaseUntil);
          },
        )
        .finally(() => {
          this.inFlight.delete(running);
          if (this.saturated) this.wake();
        });
      this.inFlight.add(running);
    }
  }
}
