import { type Db, KeyedRepository } from '@tamp/kit';
import type { AttemptOutcome } from '../domain/delivery-state';
import type { WebhookEventName } from '../domain/payload';

export const ATTEMPTS = 'webhook_attempts';

/**
 * One attempt, kept forever (operators read them with listDeliveries): a sequence's, or a test
 * delivery's. `_id` = deliveryId.
 */
export interface AttemptDocument {
  _id: string;
  jobId: string;
  event: WebhookEventName;
  sequence: number;
  attempt: number;
  attemptedAt: Date;
  target: string;
  statusCode: number | null;
  latencyMs: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  /** Which service instance made the attempt. */
  instance: string;
  /**
   * A test delivery (`sendTestDelivery`, the dashboard's button): one attempt outside the job's
   * delivery sequence, `sequence` 0 and `attempt` 1, never retried. Absent on a sequence's
   * attempts. Not part of `listDeliveries`' answer, which shows it as any other attempt.
   */
  test?: true;
}

/** The `webhook_attempts` collection: every attempt, of a sequence or a test delivery. */
export class AttemptRepository extends KeyedRepository<AttemptDocument> {
  constructor(db: Db) {
    super(db, ATTEMPTS);
  }

  async insert(attempt: AttemptDocument): Promise<void> {
    await this.collection.insertOne(attempt);
  }

  /** A job's attempts, oldest first. */
  listOfJob(jobId: string): Promise<AttemptDocument[]> {
    return this.collection
      .find({ jobId })
      .sort({ attemptedAt: 1, sequence: 1, attempt: 1 })
      .toArray();
  }
}
