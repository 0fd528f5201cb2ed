import { creditCost, type JobEvent } from '@tamp/proto';
import type { UsageDocument } from '../adapters/documents';
import type { UsageRepository } from '../adapters/usage-repository';
import { utcDayOf } from '../domain/usage-report';

/** What billing learns from the job events stream. */
export class UsageRecording {
  constructor(private readonly usage: UsageRepository) {}

  /**
   * Only completions count towards usage. A failed job's refund is not made here: the job
   * service owns the job's terminal state and refunds through refund-credits from its
   * settlement outbox (refundPending, retried by its reconciler), so one mechanism keeps the
   * rule "refunded exactly once", and an inline failure is refunded before it is answered.
   * Idempotent: the usage record's id is the job id. A batch of events is one write.
   */
  async record(events: JobEvent[]): Promise<void> {
    await this.usage.insertAll(
      events.filter((event) => event.event === 'job.completed').map(usageRecordOf),
    );
  }
}

/**
 * A job's credits are priced here, once, with proto's creditCost (the rule reservations are made
 * with) on the input bytes the job reported, so the report never prices a job again.
 */
function usageRecordOf(event: JobEvent): UsageDocument {
  const usage = event.usage;
  const inputBytes = usage?.inputBytes ?? event.result?.metrics.inputSize ?? 0;
  const completedAt = new Date(event.completedAt);
  return {
    _id: event.jobId,
    accountId: event.accountId,
    pipeline: event.pipeline,
    inputBytes,
    audioSeconds: usage?.audioSeconds ?? 0,
    megapixels: usage?.megapixels ?? 0,
    characters: usage?.characters ?? 0,
    completedAt,
    credits: creditCost(event.pipeline, inputBytes),
    completedDay: utcDayOf(completedAt),
  };
}
