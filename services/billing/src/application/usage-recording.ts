import type { JobEvent } from '@tamp/proto';
import type { UsageStore } from '../adapters/usage-store';

/** What billing learns from the job events stream. */
export class UsageRecording {
  constructor(private readonly usage: UsageStore) {}

  /**
   * Only completions count towards usage. A failed job's refund is not made here: the job
   * service owns the job's terminal state and refunds through refund-credits from its
   * settlement outbox (refundPending, retried by its reconciler), so one mechanism keeps the
   * rule "refunded exactly once", and an inline failure is refunded before it is answered.
   * Idempotent: the usage record's id is the job id.
   */
  async record(event: JobEvent): Promise<void> {
    if (event.event === 'job.completed') await this.usage.recordCompleted(event);
  }
}
