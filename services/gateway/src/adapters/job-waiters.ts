import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { jobNotification, TERMINAL_STATUSES, type Topology } from '@tamp/proto';
import type { Logger } from 'pino';

export interface JobWaiter {
  /** Resolves on a terminal notification for the job, after `ms`, or when cancelled. */
  until(ms: number): Promise<'notified' | 'timeout' | 'cancelled'>;
  cancel(): void;
}

/**
 * Long-poll support: ONE wildcard subscription on every job notification per gateway process,
 * fanned out to an in-memory map jobId → waiters, so thousands of waits cost a map entry each.
 * Callers register before they first read the job, so a notification between the read and
 * the wait is never lost.
 */
export class JobWaiters {
  private readonly waiters = new Map<string, Set<(outcome: 'notified' | 'cancelled') => void>>();
  private subscription: Subscription | undefined;

  constructor(
    private readonly nats: NatsConnection,
    private readonly topology: Topology,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    const prefix = this.topology.subjects.jobNotification('');
    this.subscription = this.nats.subscribe(this.topology.subjects.allJobNotifications, {
      callback: (error, message) => {
        if (error !== null) {
          this.logger.warn({ err: error }, 'job notification subscription error');
          return;
        }
        let jobId = message.subject.slice(prefix.length);
        try {
          const parsed = jobNotification.safeParse(message.json());
          if (parsed.success) {
            if (!TERMINAL_STATUSES.includes(parsed.data.status as never)) return;
            jobId = parsed.data.jobId;
          }
        } catch {
          // A notification without a JSON body still names the job in its subject.
        }
        this.wake(jobId, 'notified');
      },
    });
    await this.nats.flush();
  }

  get size(): number {
    let total = 0;
    for (const set of this.waiters.values()) total += set.size;
    return total;
  }

  register(jobId: string): JobWaiter {
    let settle: ((outcome: 'notified' | 'cancelled') => void) | undefined;
    let outcome: 'notified' | 'cancelled' | undefined;
    const listener = (value: 'notified' | 'cancelled') => {
      outcome ??= value;
      settle?.(value);
    };
    let set = this.waiters.get(jobId);
    if (set === undefined) {
      set = new Set();
      this.waiters.set(jobId, set);
    }
    set.add(listener);
    const remove = () => {
      const current = this.waiters.get(jobId);
      current?.delete(listener);
      if (current?.size === 0) this.waiters.delete(jobId);
    };
    return {
      until: (ms) =>
        new Promise((resolve) => {
          if (outcome !== undefined) {
            resolve(outcome);
            return;
          }
          const timer = setTimeout(() => resolve('timeout'), ms);
          settle = (value) => {
            clearTimeout(timer);
            resolve(value);
          };
        }),
      cancel: () => {
        remove();
        listener('cancelled');
      },
    };
  }

  /** Wakes every waiter (shutdown): long-polls answer with the current job at once. */
  wakeAll(): void {
    for (const jobId of [...this.waiters.keys()]) this.wake(jobId, 'cancelled');
  }

  async stop(): Promise<void> {
    this.wakeAll();
    this.subscription?.unsubscribe();
  }

  private wake(jobId: string, outcome: 'notified' | 'cancelled'): void {
    const set = this.waiters.get(jobId);
    if (set === undefined) return;
    for (const listener of set) listener(outcome);
  }
}
